"""The inspector's memories table: a user's memories filtered (status, tier, category,
text, a date range) and sorted (by date, or by score for a query through the
assembler's ranking, memlane.service.search)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from sqlalchemy import select

from memlane.models.db import unit_of_work
from memlane.models.schemas import MemoryPublic
from memlane.models.store.rows import to_public
from memlane.models.tables import MemoryRow
from memlane.pipeline.records import Category, MemoryStatus, Tier

Sort = Literal["newest", "oldest", "confirmed", "importance", "score"]
SORTS: tuple[Sort, ...] = ("newest", "oldest", "confirmed", "importance", "score")


@dataclass(frozen=True, slots=True)
class MemoryFilter:
    status: MemoryStatus | None = None
    tier: Tier | None = None
    category: Category | None = None
    text: str = ""
    since: datetime | None = None  # created at or after
    until: datetime | None = None  # created before
    sort: Sort = "newest"


def _escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def memory_rows(
    url: str, user_id: str, wanted: MemoryFilter, *, limit: int = 200
) -> list[MemoryPublic]:
    """The user's memories that pass the filter, in the sort's order (`score` sorts by
    date here: the caller ranks them for its query), at most `limit`."""
    query = select(MemoryRow).where(MemoryRow.user_id == user_id)
    if wanted.status:
        query = query.where(MemoryRow.status == wanted.status)
    if wanted.tier:
        query = query.where(MemoryRow.tier == wanted.tier)
    if wanted.category:
        query = query.where(MemoryRow.category == wanted.category)
    if wanted.text.strip():
        pattern = f"%{_escaped(wanted.text.strip().lower())}%"
        query = query.where(MemoryRow.content.ilike(pattern, escape="\\"))
    if wanted.since:
        query = query.where(MemoryRow.created_at >= wanted.since)
    if wanted.until:
        query = query.where(MemoryRow.created_at < wanted.until)
    order = {
        "oldest": (MemoryRow.ref.asc(),),
        "confirmed": (MemoryRow.confirmed_at.desc(), MemoryRow.ref.desc()),
        "importance": (MemoryRow.importance.desc(), MemoryRow.ref.desc()),
    }.get(wanted.sort, (MemoryRow.ref.desc(),))
    with unit_of_work(url) as session:
        return [to_public(row) for row in session.scalars(query.order_by(*order).limit(limit))]
