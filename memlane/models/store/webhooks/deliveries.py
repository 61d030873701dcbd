"""Deliveries' progress: which are due, claiming one for a send (a lease, so one sender
at a time and a crashed one's delivery comes back), and what became of the send."""

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
    attempts: int  # made before this one
    body: dict[str, Any]


def due(session: Session, *, now: datetime, limit: int) -> list[int]:
    """Pending deliveries whose time has come, oldest first."""
    return list(
        session.scalars(
            select(_D.id)
            .where(_D.status == "pending", _D.next_attempt_at <= now)
            .order_by(_D.next_attempt_at, _D.id)
            .limit(limit)
        )
    )


def claim(session: Session, delivery_id: int, *, now: datetime, lease: timedelta) -> Claimed | None:
    """Take the delivery for one send, if it is pending and due: its next attempt moves
    `lease` ahead, so no other sender takes it meanwhile and, should this one die, it is
    due again after the lease (at least once). None: not due, settled or gone (its user
    erased, its subscription removed)."""
    taken = session.execute(
        update(_D)
        .where(_D.id == delivery_id, _D.status == "pending", _D.next_attempt_at <= now)
        .values(next_attempt_at=now + lease)
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


def delivered(
    session: Session, delivery_id: int, *, status_code: int, attempts: int, now: datetime
) -> None:
    session.execute(
        update(_D)
        .where(_D.id == delivery_id)
        .values(
            status="delivered",
            attempts=attempts,
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
    attempts: int,
    retry_at: datetime | None,
) -> None:
    """A failed send: due again at `retry_at`, or dead (None: out of attempts, or refused)."""
    values: dict[str, Any] = {
        "attempts": attempts,
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
