"""Search: a user's memories for a query, best first, each with its score and the score's
parts — the assembler's ranking without its budget and its XML.

The order is the assembler's (pipeline.assembly.assembler, rules 1 and 4) applied to memories:
the same safety filter (active, not expired, sensitive only when asked for), the same
composite (pipeline.ranking.scoring.rank: relevance, importance × confidence, recency since the
memory was stated or confirmed, confirmations), and with a query the same relevance
floor: the memories about as relevant as the best one (r ≥ relevance_floor × best r)
first, by composite; then the rest by relevance. Without a query, by composite. Then the
caller's filters (category, tier, min_score on the composite, `since` on confirmed_at)
and the limit.

A memory whose relevance to the query is zero (no cosine above 0, no word in common) is
not a hit and is left out. A query with no relevance signal at all (empty, only
stopwords, or relevant to no memory) drops nothing: the ranking above, not an empty
answer.

Pure: the memories, their relevance, `now` and the settings come in.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from memlane.pipeline.dedup.keywords import keywords
from memlane.pipeline.ranking.scoring import RankedMemory, Weights, rank
from memlane.pipeline.records import Category, MemoryRecord, Tier


@dataclass(frozen=True, slots=True)
class SearchFilters:
    limit: int = 10
    in_categories: Collection[Category] = ()  # empty: any (a filter, not the setting)
    tiers: Collection[Tier] = ()
    min_score: float = 0.0
    since: datetime | None = None
    include_sensitive: bool = False


def usable(memory: MemoryRecord, *, now: datetime, include_sensitive: bool) -> bool:
    """Assembly rule 1 (assembly_filters.memory_exclusion) for one memory."""
    if memory.status != "active":
        return False
    if memory.expires_at is not None and memory.expires_at <= now:
        return False
    return include_sensitive or not memory.sensitive


def search_memories(
    memories: Sequence[MemoryRecord],
    *,
    user_id: str,
    query: str | None,
    relevance: Mapping[str, float],
    now: datetime,
    weights: Weights,
    half_life_hours: float,
    relevance_floor: float,
    filters: SearchFilters,
) -> list[RankedMemory]:
    """The user's memories ranked as the assembler ranks them (module docstring),
    filtered, at most `filters.limit`; each RankedMemory carries its score's parts."""
    if filters.limit < 1:
        raise ValueError(f"limit must be at least 1, not {filters.limit}")
    if not 0.0 <= relevance_floor <= 1.0:
        raise ValueError(f"relevance_floor must be in [0, 1], not {relevance_floor!r}")
    mine = [
        m
        for m in memories
        if m.user_id == user_id and usable(m, now=now, include_sensitive=filters.include_sensitive)
    ]
    ranked = rank(
        mine,
        strategy="scored",
        now=now,
        relevance=dict(relevance),
        weights=weights,
        half_life_hours=half_life_hours,
    )
    if query and relevance:
        best = max((r.breakdown.relevance for r in ranked), default=0.0)
        floor = relevance_floor * best

        def key(item: RankedMemory) -> tuple[bool, float, float, str]:
            r, score = item.breakdown.relevance, item.breakdown.composite
            if r >= floor:
                return (False, -score, 0.0, item.memory.id)
            return (True, -r, -score, item.memory.id)

        ranked.sort(key=key)
        if best > 0 and keywords(query):
            # A semantic embedder gives even "the" a cosine with everything: a query of
            # stopwords only carries no signal to filter on.
            ranked = [r for r in ranked if r.breakdown.relevance > 0]
    found = [
        r
        for r in ranked
        if (not filters.in_categories or r.memory.category in filters.in_categories)
        and (not filters.tiers or r.memory.tier in filters.tiers)
        and r.breakdown.composite >= filters.min_score
        and (filters.since is None or r.memory.confirmed_at >= filters.since)
    ]
    return found[: filters.limit]
