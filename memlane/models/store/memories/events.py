"""A memory's history: one `memory_events` row per change, written in the transaction
of the change itself (so a change and its record land together or not at all)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Connection, Table, delete, insert, select
from sqlalchemy.orm import Session

from memlane.models.schemas import EventKind, MemoryEvent
from memlane.models.store.webhooks import outbox
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
    """Events of one actor at one time, in one statement (a store job writes a batch),
    and the webhook deliveries owed for them (models/store/webhooks/outbox.py). A detail's
    `conversation_id` is also kept in its column, for deleting a conversation."""
    listed = [(memory_id, kind, dict(detail or {})) for memory_id, kind, detail in events]
    if not listed:
        return
    if at.tzinfo is None:
        raise ValueError("naive datetime given to the store; pass an aware UTC datetime")
    connection = session.connection()
    if connection.dialect.name == "postgresql":
        # every store job writes a batch: one statement of fixed text with array
        # parameters (prepared by psycopg), not an executemany's pipelined row each
        connection.exec_driver_sql(
            _PG_INSERT,
            {
                "user_id": user_id,
                "actor": actor[:120],
                "at": at,
                "memory_ids": [memory_id for memory_id, _, _ in listed],
                "conversation_ids": [detail.get("conversation_id") for _, _, detail in listed],
                "kinds": [kind for _, kind, _ in listed],
                "details": [json.dumps(detail) for _, _, detail in listed],
            },
        )
    else:
        _insert_rows(connection, user_id=user_id, actor=actor, at=at, listed=listed)
    outbox.memory_events(session, user_id=user_id, actor=actor, at=at, events=listed)


def _insert_rows(
    connection: Connection,
    *,
    user_id: str,
    actor: str,
    at: datetime,
    listed: list[tuple[str, EventKind, dict[str, Any]]],
) -> None:
    connection.execute(
        _INSERT,
        [
            {
                "user_id": user_id,
                "memory_id": memory_id,
                "conversation_id": detail.get("conversation_id"),
                "kind": kind,
                "actor": actor[:120],
                "at": at,
                "detail": detail,
            }
            for memory_id, kind, detail in listed
        ],
    )


# The events in the order given (their ids, the history's order, follow it).
_PG_INSERT = """\
INSERT INTO memory_events (user_id, memory_id, conversation_id, kind, actor, at, detail)
SELECT %(user_id)s, e.memory_id, e.conversation_id, e.kind, %(actor)s, %(at)s, e.detail::json
FROM unnest(%(memory_ids)s::text[], %(conversation_ids)s::text[], %(kinds)s::text[],
            %(details)s::text[]) WITH ORDINALITY AS e(memory_id, conversation_id, kind, detail, n)
ORDER BY e.n"""


def history(session: Session, user_id: str, memory_id: str) -> list[MemoryEvent]:
    """The memory's events, oldest first: by time, then as written (an import writes
    an old history after a newer event, such as the `purged` a purge leaves). `memory_id`
    is a full id (the only way to name a purged memory, whose `purged` event stays)."""
    rows = session.scalars(
        select(MemoryEventRow)
        .where(MemoryEventRow.user_id == user_id, MemoryEventRow.memory_id == memory_id)
        .order_by(MemoryEventRow.at, MemoryEventRow.id)
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
