"""Agent scope in the store (memlane.pipeline.scope): the agent a conversation is with,
and memories made shared when a memory about the user confirms an agent's own."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import ColumnElement, Table, bindparam, select, update
from sqlalchemy.orm import Session

from memlane.models.store.memories import events as memory_events
from memlane.models.store.users import change_feed as changes
from memlane.models.tables import Conversation, MemoryRow
from memlane.pipeline.records import MemoryRecord

_MEMORIES = cast(Table, MemoryRow.__table__)
_M = _MEMORIES.c
_SHARE: Any = (
    update(_MEMORIES)
    .where(_M.id == bindparam("b_id"), _M.user_id == bindparam("b_user_id"))
    .values(agent_id=None, change_seq=bindparam("b_number"))
)


def seen_by(column: Any, agent_id: str | None) -> ColumnElement[bool]:
    """The rows whose agent `column` a read for `agent_id` sees: the shared ones (NULL)
    and, with an agent, that agent's (pipeline.scope.sees)."""
    if agent_id is None:
        return cast(ColumnElement[bool], column.is_(None))
    return cast(ColumnElement[bool], column.is_(None) | (column == agent_id))


def conversation_agent(session: Session, conversation_id: str) -> str | None:
    """The agent the conversation is with; None: none named (or no such conversation)."""
    return session.scalar(select(Conversation.agent_id).where(Conversation.id == conversation_id))


def share(
    session: Session,
    user_id: str,
    promoted: Sequence[MemoryRecord],
    *,
    job_id: str,
    now: datetime,
) -> None:
    """Make the user's memories shared (agent_id NULL), under the user's lock, stamped
    with a change number so every working set's views take them in, and record it in
    each one's history (an `edited` event of the job, by the worker)."""
    if not promoted:
        return
    number = changes.stamp(session, user_id)
    session.execute(
        _SHARE, [{"b_id": m.id, "b_user_id": user_id, "b_number": number} for m in promoted]
    )
    memory_events.record_many(
        session,
        user_id=user_id,
        actor=memory_events.WORKER,
        at=now,
        events=[
            (m.id, "edited", {"job_id": job_id, "changes": {"agent_id": [m.agent_id, None]}})
            for m in promoted
        ],
    )
