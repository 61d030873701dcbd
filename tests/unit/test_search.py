"""Search ranks as the assembler ranks (no second rule), then filters and limits."""

from __future__ import annotations

import pytest

from memlane.pipeline.assembly.assembler import assemble_context
from memlane.pipeline.ranking.search import SearchFilters, search_memories
from tests.defaults import WEIGHTS
from tests.unit.assembly_helpers import NOW, days_ago, mem, request

MEMORIES = [
    mem("m1", "User lives in Porto.", importance=0.9, age_days=30),
    mem("m2", "User prefers window seats.", importance=0.4, age_days=1),
    mem("m3", "User is vegetarian.", importance=0.8, age_days=3, category="preference"),
    mem("m4", "User works on billing.", importance=0.6, age_days=10, category="project"),
    mem("m5", "User's dog is Biscuit.", importance=0.3, age_days=0.5, tier="verified"),
    mem("m6", "Gone.", status="deleted"),
    mem("m7", "Secret.", sensitive=True, importance=1.0),
    mem("m8", "Not mine.", user="u2"),
    mem("m9", "Expired.", expires_at=days_ago(1)),
]
RELEVANCE = {"m1": 0.92, "m2": 0.2, "m3": 0.85, "m4": 0.5, "m5": 0.1, "m7": 0.95}


def found(query: str | None = "where", **filters: object) -> list[str]:
    hits = search_memories(
        MEMORIES,
        user_id="u1",
        query=query,
        relevance=RELEVANCE if query else {},
        now=NOW,
        weights=WEIGHTS,
        half_life_hours=168.0,
        relevance_floor=0.8,
        filters=SearchFilters(**{"limit": 50, **filters}),  # type: ignore[arg-type]
    )
    return [h.memory.id for h in hits]


def test_the_order_is_the_assemblers_candidate_order() -> None:
    candidates = [m for m in MEMORIES if m.tier == "candidate"]
    assembled = assemble_context(
        request(
            memories=candidates,
            query="where",
            strategy="scored",
            budget_tokens=100_000,
            relevance=RELEVANCE,
        )
    )
    in_pack = [i.id for i in assembled.pack.items if i.section == "memory" and i.included]
    assert found(tiers=("candidate",)) == in_pack


def test_above_the_floor_by_composite_then_the_rest_by_relevance() -> None:
    order = found()
    # m1 (0.92) and m3 (0.85 ≥ 0.8 × 0.92) compete on composite; then m4, m2, m5 by r
    assert order[:2] == ["m1", "m3"] or order[:2] == ["m3", "m1"]
    assert order[2:] == ["m4", "m2", "m5"]


def test_what_the_assembler_would_never_show_is_never_found() -> None:
    assert set(found()) == {"m1", "m2", "m3", "m4", "m5"}
    assert "m7" in found(include_sensitive=True)


def test_filters_and_limit() -> None:
    assert found(in_categories=("preference",)) == ["m3"]
    assert found(tiers=("verified",)) == ["m5"]
    assert found(since=days_ago(2)) == ["m2", "m5"]
    assert found(limit=2) == found()[:2]
    hits = search_memories(
        MEMORIES,
        user_id="u1",
        query="where",
        relevance=RELEVANCE,
        now=NOW,
        weights=WEIGHTS,
        half_life_hours=168.0,
        relevance_floor=0.8,
        filters=SearchFilters(min_score=0.5),
    )
    assert hits and all(h.breakdown.composite >= 0.5 for h in hits)
    assert len(hits) < len(found())


def test_without_a_query_by_composite() -> None:
    assert found(None) == found(None)  # deterministic
    with pytest.raises(ValueError, match="limit"):
        found(limit=0)


def ranked_for(query: str | None, relevance: dict[str, float]) -> list[str]:
    hits = search_memories(
        MEMORIES,
        user_id="u1",
        query=query,
        relevance=relevance,
        now=NOW,
        weights=WEIGHTS,
        half_life_hours=168.0,
        relevance_floor=0.8,
        filters=SearchFilters(limit=50),
    )
    return [h.memory.id for h in hits]


def test_memories_of_zero_relevance_are_no_hits() -> None:
    # m1 and m3 match; m2, m4 and m5 have relevance 0 (or none at all)
    assert ranked_for("tea time", {"m1": 0.3, "m3": 0.6, "m2": 0.0, "m4": -0.2}) == ["m3", "m1"]


def test_a_query_without_relevance_signal_drops_nothing() -> None:
    usual = ranked_for(None, {})
    assert len(usual) == 5
    # relevant to nothing: the usual ranking, not an empty answer
    assert ranked_for("quantum chromodynamics", {m: 0.0 for m in usual}) == usual
    # stopwords only: a semantic embedder still gives it cosines; nothing is dropped
    # (ranked by relevance, as the assembler ranks that query)
    assert sorted(ranked_for("what is the", {"m1": 0.1, "m2": 0.05})) == sorted(usual)
