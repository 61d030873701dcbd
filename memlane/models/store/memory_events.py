"""A memory's history: one `memory_events` row per change, written in the transaction
of the change itself (so a change and its record land together or not at all)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, delete, insert, select
from sqlalchemy.orm import Session

from memlane.models.schemas import EventKind, MemoryEvent
from memlane.models.tables import MemoryEventRow
from memlane.pipeline.errors import NotFoundError

WORKER = "worker"
# the table's, not the ORM's bulk insert: no mapper work for rows never read back
_INSERT = insert(cast(Table, MemoryEventRow.__table__))


def record(
    session: Session,
    *,
    user_id: str,
    memory_id: str,
    kind: EventKind,
    actor: str,
    at: datetime,
    detail: Mapping[str, Any] | None = None,
) -> None:
    record_many(session, user_id=user_id, actor=actor, at=at, events=[(memory_id, kind, detail)])


def record_many(
    session: Session,
    *,
    user_id: str,
    actor: str,
    at: datetime,
    events: Iterable[tuple[str, EventKind, Mapping[str, Any] | None]],
) -> None:
    """Events of one actor at one time, in one statement (a store job writes a batch).
    A detail's `conversation_id` is also kept in its column, for deleting a
    conversation."""
    rows = [
        {
            "user_id": user_id,
            "memory_id": memory_id,
            "conversation_id": (detail or {}).get("conversation_id"),
            "kind": kind,
            "actor": actor[:120],
            "at": at,
            "detail": dict(detail or {}),
        }
        for memory_id, kind, detail in events
    ]
    if rows:
        session.execute(_INSERT, rows)


def history(session: Session, user_id: str, memory_id: str) -> list[MemoryEvent]:
    """The memory's events, oldest first. `memory_id` is a full id (the only way to name
    a purged memory, whose `purged` event stays)."""
    rows = session.scalars(
        select(MemoryEventRow)
        .where(MemoryEventRow.user_id == user_id, MemoryEventRow.memory_id == memory_id)
        .order_by(MemoryEventRow.id)
    ).all()
    if not rows:
        raise NotFoundError(f"user {user_id!r} has no memory {memory_id!r} and no history of one")
    return [
        MemoryEvent(
            id=row.id,
            memory_id=row.memory_id,
            kind=row.kind,  # type: ignore[arg-type]
            actor=row.actor,
            at=row.at,
            detail=row.detail or {},
        )
        for row in rows
    ]


def forget_history(session: Session, user_id: str, memory_id: str) -> None:
    """Delete the memory's events: a purge leaves no content behind, and edits' events
    hold old contents."""
    session.execute(
        delete(MemoryEventRow).where(
            MemoryEventRow.user_id == user_id, MemoryEventRow.memory_id == memory_id
        )
    )
