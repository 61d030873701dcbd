"""Deliveries' progress: publishing those due, claiming one for a send, and what became
of the send.

A delivery's `attempts` is its claim token: publishing hands out (id, attempts), and a
send claims the row only while its attempts are still that number, counting the attempt
as it claims. So of two messages for one attempt (beat's tick and a retry's own, or a
message redelivered), one sends and the other finds nothing to do. Publishing and
claiming each move `next_attempt_at` a lease ahead: a message lost, or a sender that
died mid-send, leaves the delivery due again after the lease (at least once)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import case, delete, select, update
from sqlalchemy.orm import Session

from memlane.models.tables import MemoryRow, WebhookDeliveryRow, WebhookRow
from memlane.models.webhook_schemas import DeliveryPublic

_D = WebhookDeliveryRow


@dataclass(frozen=True, slots=True)
class Claimed:
    """A delivery in hand: what to send, where, and with which secret."""

    id: int
    url: str
    secret: str
    attempts: int  # this one included
    body: dict[str, Any]


def publish_due(
    session: Session, *, now: datetime, lease: timedelta, limit: int
) -> list[tuple[int, int]]:
    """The pending deliveries whose time has come, oldest first, as (id, attempts) to
    publish; each leased, so the next tick does not publish it again meanwhile."""
    due = (
        select(_D.id)
        .where(_D.status == "pending", _D.next_attempt_at <= now)
        .order_by(_D.next_attempt_at, _D.id)
        .limit(limit)
    )
    taken = session.execute(
        update(_D)
        .where(_D.id.in_(due.scalar_subquery()), _D.next_attempt_at <= now)
        .values(next_attempt_at=now + lease)
        .returning(_D.id, _D.attempts)
    )
    return sorted((row.id, row.attempts) for row in taken)


def claim(
    session: Session, delivery_id: int, *, attempts: int, now: datetime, lease: timedelta
) -> Claimed | None:
    """Take the delivery for one send if it is pending with `attempts` made (the token it
    was published with), counting this attempt. None: another message's send took it,
    it is settled, or gone (its user erased, its subscription removed)."""
    taken = session.execute(
        update(_D)
        .where(_D.id == delivery_id, _D.status == "pending", _D.attempts == attempts)
        .values(attempts=attempts + 1, next_attempt_at=now + lease)
    )
    if not taken.rowcount:  # type: ignore[attr-defined]
        return None
    row = session.get(_D, delivery_id)
    hook = session.get(WebhookRow, row.webhook_id) if row is not None else None
    if row is None or hook is None:
        return None
    data = dict(row.data)
    if hook.include_content and "memory_id" in data:
        # read now: a memory purged or erased since has no text left to send
        data["content"] = session.scalar(
            select(MemoryRow.content).where(
                MemoryRow.id == data["memory_id"], MemoryRow.user_id == row.user_id
            )
        )
    body = {
        "id": row.event_id,
        "type": row.event_type,
        "occurred_at": row.occurred_at.isoformat(),
        "user_id": row.user_id,
        "data": data,
    }
    return Claimed(id=row.id, url=hook.url, secret=hook.secret, attempts=row.attempts, body=body)


def delivered(session: Session, delivery_id: int, *, status_code: int, now: datetime) -> None:
    session.execute(
        update(_D)
        .where(_D.id == delivery_id)
        .values(
            status="delivered",
            response_status=status_code,
            last_error=None,
            delivered_at=now,
            # the erased user's id stays only until the erasure is told
            user_id=case((_D.event_type == "user.erased", None), else_=_D.user_id),
        )
    )


def failed(
    session: Session,
    delivery_id: int,
    *,
    error: str,
    status_code: int | None,
    retry_at: datetime | None,
) -> None:
    """A failed send: due again at `retry_at`, or dead (None: out of attempts, or refused)."""
    values: dict[str, Any] = {
        "last_error": error[:2000],
        "response_status": status_code,
    }
    if retry_at is None:
        values["status"] = "dead"
    else:
        values["next_attempt_at"] = retry_at
    session.execute(update(_D).where(_D.id == delivery_id).values(**values))


def drop_user(session: Session, user_id: str) -> int:
    """Delete every delivery of the user (erasure): none is sent after it."""
    result = session.execute(delete(_D).where(_D.user_id == user_id))
    return int(result.rowcount)  # type: ignore[attr-defined]


def list_deliveries(
    session: Session,
    *,
    status: str | None = None,
    webhook_id: str | None = None,
    limit: int = 100,
) -> list[DeliveryPublic]:
    """The most recent deliveries first."""
    query = select(_D).order_by(_D.id.desc()).limit(limit)
    if status is not None:
        query = query.where(_D.status == status)
    if webhook_id is not None:
        query = query.where(_D.webhook_id == webhook_id)
    return [
        DeliveryPublic(
            id=row.id,
            webhook_id=row.webhook_id,
            event_id=row.event_id,
            event_type=row.event_type,  # type: ignore[arg-type]
            user_id=row.user_id,
            occurred_at=row.occurred_at,
            data=row.data,
            status=row.status,  # type: ignore[arg-type]
            attempts=row.attempts,
            next_attempt_at=row.next_attempt_at,
            last_error=row.last_error,
            response_status=row.response_status,
            delivered_at=row.delivered_at,
        )
        for row in session.scalars(query)
    ]
