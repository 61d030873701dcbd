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


@dataclass(frozen=True, slots=True)
class _Hook:
    id: str
    events: frozenset[str]
    users: str | None

    def wants(self, event_type: str, user_id: str | None) -> bool:
        if event_type not in self.events:
            return False
        return self.users is None or (user_id is not None and fnmatchcase(user_id, self.users))


def _hooks(session: Session, types: set[str]) -> list[_Hook]:
    """The subscriptions to any of `types` (one read of the small `webhooks` table)."""
    rows = session.execute(select(WebhookRow.id, WebhookRow.events, WebhookRow.users)).all()
    hooks = [_Hook(row.id, frozenset(row.events), row.users) for row in rows]
    return [hook for hook in hooks if hook.events & types]


def record(
    session: Session, hooks: Sequence[_Hook], events: Sequence[Event], *, at: datetime
) -> int:
    """Owe each event to every subscription of `hooks` that wants it; how many deliveries.
    One event id per event, whichever subscriptions it goes to."""
    rows: list[dict[str, Any]] = []
    for event in events:
        event_id = f"evt_{uuid.uuid4().hex}"
        rows.extend(
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
            for hook in hooks
            if hook.wants(event.type, event.user_id)
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
    sent = [(m, MEMORY_EVENT_TYPES[k]) for m, k, _ in events if k in MEMORY_EVENT_TYPES]
    types = {event_type for _, event_type in sent}
    if not sent:
        return 0
    hooks = [h for h in _hooks(session, types) if any(h.wants(t, user_id) for t in types)]
    if not hooks:
        return 0
    written = session.execute(
        select(MemoryEventRow.id, MemoryEventRow.memory_id, MemoryEventRow.kind)
        .where(
            MemoryEventRow.user_id == user_id,
            MemoryEventRow.at == at,
            MemoryEventRow.actor == actor[:120],
            MemoryEventRow.memory_id.in_({m for m, _ in sent}),
        )
        .order_by(MemoryEventRow.id)
    ).all()
    return record(
        session,
        hooks,
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
    hooks = _hooks(session, {event_type})
    if not hooks:
        return 0
    job = session.execute(
        select(Job.user_id, Job.conversation_id).where(Job.id == job_id)
    ).one_or_none()
    if job is None:
        return 0
    data = {"job_id": job_id, "conversation_id": job.conversation_id}
    return record(session, hooks, [Event(event_type, job.user_id, data)], at=at)


def user_erased(session: Session, user_id: str, *, at: datetime) -> int:
    """A `user.erased` delivery (after the erasure deleted the user's pending ones)."""
    hooks = _hooks(session, {"user.erased"})
    return record(session, hooks, [Event("user.erased", user_id, {})], at=at) if hooks else 0
