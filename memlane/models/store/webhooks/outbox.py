"""Events owed to subscriptions, written in the transaction of the event itself (an
outbox): a change and its deliveries commit together or not at all, and the workers of
the webhooks queue send them later (memlane.workers.webhooks).

Memory events are the `memory_events` rows a change writes anyway
(models/store/memories/events.py): a delivery names the row (`memory_event_id`), it is not
a second history. With no subscription the cost is one read of the (small) `webhooks`
table per recording call."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from fnmatch import fnmatchcase
from typing import Any, cast

from sqlalchemy import Table, insert, select
from sqlalchemy.orm import Session

from memlane.models.tables import Job, MemoryEventRow, WebhookDeliveryRow, WebhookRow

_INSERT = insert(cast(Table, WebhookDeliveryRow.__table__))

# What a memory event (schemas.EventKind) is to a subscriber; `suppressed` (a forgotten
# fact said again, not stored) changes no memory and is not sent.
MEMORY_EVENT_TYPES: dict[str, str] = {
    "created": "memory.created",
    "forgotten": "memory.forgotten",
    "purged": "memory.forgotten",
    **{
        kind: "memory.updated"
        for kind in (
            "confirmed",
            "superseded",
            "edited",
            "pinned",
            "verified",
            "demoted",
            "quarantined",
            "restored",
            "marked_sensitive",
            "unmarked_sensitive",
            "evidence_removed",
        )
    },
}


@dataclass(frozen=True, slots=True)
class Event:
    type: str
    user_id: str | None
    data: Mapping[str, Any]


def _subscribers(session: Session, types: set[str], user_id: str | None) -> list[str]:
    """The ids of the subscriptions to any of `types` whose user glob takes `user_id`."""
    rows = session.execute(select(WebhookRow.id, WebhookRow.events, WebhookRow.users)).all()
    return [
        row.id
        for row in rows
        if types & set(row.events)
        and (row.users is None or (user_id is not None and fnmatchcase(user_id, row.users)))
    ]


def record(session: Session, events: Sequence[Event], *, at: datetime) -> int:
    """Owe each event to every subscription that wants it; how many deliveries."""
    if not events:
        return 0
    hooks = session.execute(select(WebhookRow.id, WebhookRow.events, WebhookRow.users)).all()
    rows = []
    for event in events:
        event_id = f"evt_{uuid.uuid4().hex}"
        for hook in hooks:
            if event.type not in hook.events:
                continue
            if hook.users is not None and (
                event.user_id is None or not fnmatchcase(event.user_id, hook.users)
            ):
                continue
            rows.append(
                {
                    "webhook_id": hook.id,
                    "event_id": event_id,
                    "event_type": event.type,
                    "user_id": event.user_id,
                    "occurred_at": at,
                    "data": dict(event.data),
                    "status": "pending",
                    "attempts": 0,
                    "next_attempt_at": at,
                }
            )
    if rows:
        session.execute(_INSERT, rows)
    return len(rows)


def memory_events(
    session: Session,
    *,
    user_id: str,
    actor: str,
    at: datetime,
    events: Iterable[tuple[str, str, Mapping[str, Any] | None]],
) -> int:
    """Deliveries of memory events just written (memory id, kind, detail), named by
    their `memory_events` rows."""
    typed = [(m, k, MEMORY_EVENT_TYPES[k]) for m, k, _ in events if k in MEMORY_EVENT_TYPES]
    if not typed or not _subscribers(session, {t for _, _, t in typed}, user_id):
        return 0
    written = session.execute(
        select(MemoryEventRow.id, MemoryEventRow.memory_id, MemoryEventRow.kind)
        .where(
            MemoryEventRow.user_id == user_id,
            MemoryEventRow.at == at,
            MemoryEventRow.actor == actor[:120],
            MemoryEventRow.memory_id.in_({m for m, _, _ in typed}),
        )
        .order_by(MemoryEventRow.id)
    ).all()
    return record(
        session,
        [
            Event(
                MEMORY_EVENT_TYPES[row.kind],
                user_id,
                {"memory_id": row.memory_id, "memory_event_id": row.id, "kind": row.kind},
            )
            for row in written
            if row.kind in MEMORY_EVENT_TYPES
        ],
        at=at,
    )


def job_finished(session: Session, job_id: str, *, status: str, at: datetime) -> int:
    """A `job.done` or `job.failed` delivery, when someone subscribes to it."""
    event_type = f"job.{status}"
    job = session.execute(
        select(Job.user_id, Job.conversation_id).where(Job.id == job_id)
    ).one_or_none()
    if job is None or not _subscribers(session, {event_type}, job.user_id):
        return 0
    data = {"job_id": job_id, "conversation_id": job.conversation_id}
    return record(session, [Event(event_type, job.user_id, data)], at=at)


def user_erased(session: Session, user_id: str, *, at: datetime) -> int:
    """A `user.erased` delivery (after the erasure deleted the user's pending ones)."""
    if not _subscribers(session, {"user.erased"}, user_id):
        return 0
    return record(session, [Event("user.erased", user_id, {})], at=at)
