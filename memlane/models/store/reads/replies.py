"""Assembly rule 4's replies (issue 39): the memory said next after a line that asks,
read for the store's assembly (models/store/reads/assembly.py) and the working set's
(memlane.models.working_set), computed at read from the columns every memory has."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from sqlalchemy import ColumnElement, and_, bindparam, or_, select
from sqlalchemy.orm import Session, aliased

from memlane.models.tables import MemoryRow


def replies_statement(columns: Sequence[Any], visible: Sequence[ColumnElement[bool]]) -> Any:
    """Of the memories `askers` (a parameter), each one's id (`asker_id`) and its reply's
    `columns`: the reply is the memory said next in its conversation (`_pairs`),
    whatever its state, paired with it only when `visible` (the read's filters) passes
    it: a reply filtered out is no reply, not the next line's turn."""
    pairs = _pairs().subquery("said_next")
    return (
        select(pairs.c.asker_id, *columns)
        .select_from(pairs.join(MemoryRow, MemoryRow.id == pairs.c.reply_id))
        .where(*visible)
    )


@cache
def _pairs() -> Any:
    """Of the memories `askers` (parameters `user_id`, `askers`), each one's id
    (`asker_id`) and its reply's (`reply_id`; null for none, or another user's asker):
    the memory said next in its conversation (source conversation, by `created_at`, when
    it was said, then `ref`, the order of one extraction's memories). Its lookup is one
    probe of ix_memories_user_conversation_said (migration 0017) per asker. Built once:
    a statement of two aliases of the memories costs milliseconds to build, more than it
    takes to run."""
    asker = aliased(MemoryRow, name="asker")
    later = aliased(MemoryRow, name="later")
    said_next = (
        select(later.id)
        .where(
            # the user named here, not in the outer WHERE: there SQLite (no ANALYZE)
            # would walk all the user's memories for a few askers instead of their ids
            asker.user_id == bindparam("user_id"),
            later.user_id == bindparam("user_id"),
            later.source_conversation_id == asker.source_conversation_id,
            # implied by the next condition, but a range the index can start from
            later.created_at >= asker.created_at,
            or_(
                later.created_at > asker.created_at,
                and_(later.created_at == asker.created_at, later.ref > asker.ref),
            ),
        )
        .order_by(later.created_at, later.ref)
        .limit(1)
        .correlate(asker)
        .scalar_subquery()
    )
    return select(asker.id.label("asker_id"), said_next.label("reply_id")).where(
        asker.id.in_(bindparam("askers", expanding=True))
    )


def said_next(session: Session, user_id: str, askers: Sequence[str]) -> dict[str, str]:
    """Each of the user's memories `askers`' reply's id, unfiltered (the working set
    filters it as it filters its rows); none for a memory whose conversation ends with it."""
    rows = session.execute(_pairs(), {"user_id": user_id, "askers": list(askers)})
    return {asker: reply for asker, reply in rows.all() if reply is not None}
