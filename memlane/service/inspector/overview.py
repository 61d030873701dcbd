"""Users as the inspector lists them: found by id, and one user's counts, last activity
and storage, read in a few aggregate statements."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, func, or_, select, union
from sqlalchemy.orm import Session

from memlane.models.db import unit_of_work
from memlane.models.tables import (
    ContextPackRow,
    Conversation,
    Job,
    MemoryFingerprint,
    MemoryRow,
    Message,
)
from memlane.pipeline.errors import NotFoundError


@dataclass(frozen=True, slots=True)
class PackLine:
    """A stored context pack, listed: when, for which question, how full."""

    pack_id: str
    assembled_at: datetime
    query: str | None
    used_tokens: int
    budget_tokens: int
    dropped: int


@dataclass(frozen=True, slots=True)
class UserSummary:
    user_id: str
    by_status: dict[str, int]
    by_tier: dict[str, int]  # of the active memories
    conversations: int
    messages: int
    fingerprints: int  # what purges left
    memory_chars: int  # the memories' text, in characters
    message_chars: int
    last_activity: datetime | None
    packs: list[PackLine] = field(default_factory=list)

    @property
    def active(self) -> int:
        return self.by_status.get("active", 0)

    def count(self, name: str) -> int:
        """active, pinned, verified, forgotten (deleted), superseded, quarantined."""
        if name in ("pinned", "verified", "candidate"):
            return self.by_tier.get(name, 0)
        return self.by_status.get("deleted" if name == "forgotten" else name, 0)


def _escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _within(column: Any, patterns: Sequence[str]) -> ColumnElement[bool]:
    """`column` matches one of a key's user patterns (memlane.service.keys.reach: an
    exact id, or a prefix ending in `*`)."""
    return or_(
        *(
            column.like(_escaped(p[:-1]) + "%", escape="\\") if p.endswith("*") else column == p
            for p in patterns
        )
    )


def find_users(url: str, text: str, *, limit: int = 50, within: Sequence[str] = ()) -> list[str]:
    """User ids holding memories or conversations that start with `text` (all, for an
    empty text), sorted; an exact match first. With `within` (a key's user patterns),
    only the users they match: the limit counts users the key may see, so another
    tenant's many users cannot crowd its own out."""
    text = text.strip()
    pattern = _escaped(text) + "%"
    selects = []
    for column in (MemoryRow.user_id, Conversation.user_id):
        query = select(column).where(column.like(pattern, escape="\\"))
        selects.append(query.where(_within(column, within)) if within else query)
    ids = union(*selects).subquery()
    with unit_of_work(url) as session:
        found = list(session.scalars(select(ids.c[0]).order_by(ids.c[0]).limit(limit)))
    if text in found:
        found.remove(text)
        found.insert(0, text)
    return found


def _grouped(session: Session, column: object, user_id: str, *where: object) -> dict[str, int]:
    rows = session.execute(
        select(column, func.count())  # type: ignore[call-overload]
        .where(MemoryRow.user_id == user_id, *where)
        .group_by(column)
    )
    return {str(key): int(n) for key, n in rows}


def user_summary(url: str, user_id: str, *, packs: int = 20) -> UserSummary:
    """One user's figures; NotFoundError for a user memlane holds nothing of."""
    with unit_of_work(url) as session:
        by_status = _grouped(session, MemoryRow.status, user_id)
        by_tier = _grouped(session, MemoryRow.tier, user_id, MemoryRow.status == "active")
        memory_chars, memory_seen = session.execute(
            select(
                func.coalesce(func.sum(func.length(MemoryRow.content)), 0),
                func.max(MemoryRow.confirmed_at),
            ).where(MemoryRow.user_id == user_id)
        ).one()
        conversations, last_message = session.execute(
            select(func.count(), func.max(Conversation.last_message_at)).where(
                Conversation.user_id == user_id
            )
        ).one()
        messages, message_chars = session.execute(
            select(func.count(), func.coalesce(func.sum(func.length(Message.content)), 0))
            .join(Conversation, Conversation.id == Message.conversation_id)
            .where(Conversation.user_id == user_id)
        ).one()
        fingerprints = session.scalar(
            select(func.count()).where(MemoryFingerprint.user_id == user_id)
        )
        jobs = session.scalar(select(func.count()).where(Job.user_id == user_id))
        if not by_status and not conversations and not fingerprints and not jobs:
            raise NotFoundError(f"memlane holds nothing of user {user_id!r}")
        pack_rows = session.execute(
            select(ContextPackRow.id, ContextPackRow.assembled_at, ContextPackRow.body)
            .where(ContextPackRow.user_id == user_id)
            .order_by(ContextPackRow.assembled_at.desc())
            .limit(packs)
        ).all()
    times = [t for t in (memory_seen, last_message) if t is not None]
    return UserSummary(
        user_id=user_id,
        by_status=by_status,
        by_tier=by_tier,
        conversations=int(conversations),
        messages=int(messages),
        fingerprints=int(fingerprints or 0),
        memory_chars=int(memory_chars),
        message_chars=int(message_chars),
        last_activity=max(times) if times else None,
        packs=[
            PackLine(
                pack_id=pack_id,
                assembled_at=at,
                query=body.get("query"),
                used_tokens=int(body.get("used_tokens", 0)),
                budget_tokens=int(body.get("budget_tokens", 0)),
                dropped=int(body.get("dropped_count", 0)),
            )
            for pack_id, at, body in pack_rows
        ],
    )
