"""Erasing a user ("delete my data"): every row of theirs, in every table, in one
transaction taken under the user's locks.

Nothing of the user stays, not even their change-feed counter: a process whose working
set holds a view of the user sees the user's change number go back (it reads -1, no
row) and drops the view (models/working_set.py). A task still in flight for one of the
user's jobs finds no job and does nothing (workers/runner.py). A context pack still
waiting in some process's background writer is refused by the fence the erasure leaves
(models/store/users/erasures.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from memlane.models.store.memories import memories
from memlane.models.store.users import erasures
from memlane.models.store.webhooks import deliveries, outbox
from memlane.models.tables import (
    ContextPackRow,
    Conversation,
    EpisodeRow,
    Job,
    MemoryEventRow,
    MemoryFingerprint,
    MemoryKeyword,
    MemoryKeywordCount,
    MemoryRow,
    Message,
    ProcedureRow,
    RemovedItem,
    SoulBlockRow,
    UserSecret,
    UserState,
)

# Children before parents (messages and jobs name their conversation).
_BY_USER: tuple[Any, ...] = (
    MemoryEventRow,
    MemoryFingerprint,
    UserSecret,
    MemoryKeyword,
    MemoryKeywordCount,
    MemoryRow,
    EpisodeRow,
    ProcedureRow,
    SoulBlockRow,
    ContextPackRow,
    RemovedItem,
    Job,
    Conversation,
    UserState,
)


def erase(session: Session, user_id: str, *, now: datetime) -> dict[str, int]:
    """Delete every row of the user, leaving the fence; the rows deleted per table."""
    memories.user_lock(session, user_id)  # the store stage's lock: no write lands after
    session.execute(select(UserState).where(UserState.user_id == user_id).with_for_update())
    conversation_ids = select(Conversation.id).where(Conversation.user_id == user_id)
    counts = {
        "messages": _deleted(
            session, delete(Message).where(Message.conversation_id.in_(conversation_ids))
        )
    }
    for table in _BY_USER:
        counts[table.__tablename__] = _deleted(
            session, delete(table).where(table.user_id == user_id)
        )
    # none of the user's events is sent after this (not even one waiting for a retry);
    # subscribers hear of the erasure itself
    counts["webhook_deliveries"] = deliveries.drop_user(session, user_id)
    erasures.fence(session, user_id, now=now)
    outbox.user_erased(session, user_id, at=now)
    return counts


def _deleted(session: Session, statement: object) -> int:
    return int(session.execute(statement).rowcount)  # type: ignore[attr-defined,call-overload]
