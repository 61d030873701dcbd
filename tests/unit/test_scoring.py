"""Scoring formulas and ranking strategies, with hand-computed values."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta
from functools import partial
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlane.pipeline.ranking import scoring as scoring_rules
from memlane.pipeline.ranking.scoring import (
    STRATEGIES,
    Strategy,
    Weights,
    balanced_score,
    cosine,
    effective_importance,
    frequency_score,
)
from memlane.pipeline.records import MemoryRecord
from tests.defaults import HALF_LIFE_HOURS, WEIGHTS

# The settings' defaults, passed as memlane's callers pass the settings.
rank = partial(scoring_rules.rank, weights=WEIGHTS, half_life_hours=HALF_LIFE_HOURS)
score_memory = partial(scoring_rules.score_memory, weights=WEIGHTS, half_life_hours=HALF_LIFE_HOURS)
recency_score = partial(scoring_rules.recency_score, half_life_hours=HALF_LIFE_HOURS)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def hours_ago(hours: float) -> datetime:
    return NOW - timedelta(hours=hours)


def memory(
    memory_id: str = "mem_1",
    *,
    importance: float = 0.8,
    confidence: float = 1.0,
    access_count: int = 1,
    created: float = 0.0,
    confirmed: float | None = None,
    accessed: float = 0.0,
) -> MemoryRecord:
    return MemoryRecord(
        id=memory_id,
        user_id="u1",
        content=f"memory {memory_id}",
        category="fact",
        importance=importance,
        confidence=confidence,
        access_count=access_count,
        created_at=hours_ago(created),
        confirmed_at=hours_ago(created if confirmed is None else confirmed),
        accessed_at=hours_ago(accessed),
    )


@pytest.mark.parametrize(
    ("hours", "expected"),
    [(0, 1.0), (168, 0.5), (336, 0.25), (84, 2**-0.5), (-5, 1.0)],  # -5: accessed "later"
)
def test_recency_halves_every_seven_days(hours: float, expected: float) -> None:
    assert recency_score(hours_ago(hours), now=NOW) == pytest.approx(expected, rel=1e-12)


def test_recency_half_life_is_a_parameter() -> None:
    assert recency_score(hours_ago(24), now=NOW, half_life_hours=24) == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("count", "expected"),
    [(0, 0.0), (1, math.log10(2) / 2), (9, 0.5), (99, 1.0), (100, 1.0), (10_000, 1.0), (-3, 0.0)],
)
def test_frequency(count: int, expected: float) -> None:
    assert frequency_score(count) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("importance", "hours", "expected"),
    [(1.0, 1, 0.5), (1.0, 0, 1.0), (0.6, 2, 0.2), (0.9, 8, 0.1), (0.0, 5, 0.0)],
)
def test_balanced_is_importance_over_one_plus_hours(
    importance: float, hours: float, expected: float
) -> None:
    assert balanced_score(importance, hours_ago(hours), now=NOW) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("importance", "confidence", "expected"),
    [(1.0, 1.0, 1.0), (1.0, 0.7, 0.85), (0.8, 0.0, 0.4), (0.8, 0.7, 0.68)],
)
def test_effective_importance(importance: float, confidence: float, expected: float) -> None:
    assert effective_importance(importance, confidence) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ([1.0, 0.0], [1.0, 0.0], 1.0),
        ([1.0, 0.0], [0.0, 2.0], 0.0),
        ([1.0, 0.0], [1.0, 1.0], 2**-0.5),
        ([1.0, 2.0], [-1.0, -2.0], 0.0),  # opposite: clipped to 0
        ([], [], 0.0),
        ([0.0, 0.0], [1.0, 0.0], 0.0),
        ([1.0, 0.0], [1.0, 0.0, 0.0], 0.0),  # another dimension
        ([math.nan, 1.0], [1.0, 1.0], 0.0),  # was 1.0: min(1.0, nan) is 1.0
        ([math.inf, 1.0], [1.0, 1.0], 0.0),
    ],
)
def test_cosine(a: list[float], b: list[float], expected: float) -> None:
    assert cosine(a, b) == pytest.approx(expected)


def test_composite_with_default_weights() -> None:
    # relevance 0.5, importance 0.8 said by the user, last confirmed a week ago, seen 9
    # times: 0.40·0.5 + 0.30·0.8 + 0.20·0.5 + 0.10·0.5 = 0.20 + 0.24 + 0.10 + 0.05 = 0.59
    said = memory(importance=0.8, confidence=1.0, created=300, confirmed=168, access_count=9)
    breakdown = score_memory(said, relevance=0.5, now=NOW)
    assert breakdown.relevance == 0.5
    assert breakdown.importance == pytest.approx(0.8)
    assert breakdown.recency == pytest.approx(0.5)
    assert breakdown.frequency == pytest.approx(0.5)
    assert breakdown.composite == pytest.approx(0.59)
    # inferred (confidence 0.7): importance' = 0.8 · 0.85 = 0.68, so 0.59 − 0.30·0.12 = 0.554
    inferred = said.model_copy(update={"confidence": 0.7})
    assert score_memory(inferred, relevance=0.5, now=NOW).composite == pytest.approx(0.554)


def test_composite_weights_are_configurable() -> None:
    item = memory(importance=0.8, created=168, access_count=9)
    only_relevance = score_memory(item, relevance=0.3, now=NOW, weights=Weights(1, 0, 0, 0))
    assert only_relevance.composite == pytest.approx(0.3)
    only_recency = score_memory(item, relevance=0.3, now=NOW, weights=Weights(0, 0, 1, 0))
    assert only_recency.composite == pytest.approx(0.5)


def test_being_shown_in_a_context_never_raises_a_memory_in_scored() -> None:
    # the feedback loop the design forbids: a memory shown a minute ago, stated a month
    # ago, against one stated a day ago and never shown
    shown = memory("mem_shown", created=720, accessed=0.02)
    said = memory("mem_said", created=24, accessed=24)
    assert score_memory(shown, relevance=0.5, now=NOW).recency == pytest.approx(
        recency_score(hours_ago(720), now=NOW)
    )
    ranked = rank([shown, said], strategy="scored", now=NOW, relevance={})
    assert [r.memory.id for r in ranked] == ["mem_said", "mem_shown"]
    # while `recent`, HTM's access order, puts the one just shown first
    recent = rank([shown, said], strategy="recent", now=NOW)
    assert [r.memory.id for r in recent] == ["mem_shown", "mem_said"]


def test_a_confirmation_moves_recency_but_not_the_balanced_age() -> None:
    confirmed = memory("mem_c", created=720, confirmed=1)
    assert score_memory(confirmed, relevance=0, now=NOW).recency == pytest.approx(
        recency_score(hours_ago(1), now=NOW)
    )
    assert balanced_score(0.8, confirmed.created_at, now=NOW) == pytest.approx(0.8 / 721)


@pytest.mark.parametrize(("relevance", "used"), [(1.5, 1.0), (-0.2, 0.0), (math.nan, 0.0)])
def test_relevance_is_clipped_to_the_unit_interval(relevance: float, used: float) -> None:
    breakdown = score_memory(memory(), relevance=relevance, now=NOW, weights=Weights(1, 0, 0, 0))
    assert (breakdown.relevance, breakdown.composite) == (used, used)


def test_confidence_ranks_a_statement_above_an_equal_inference() -> None:
    # The inference has the smaller id, so only confidence can put the statement first.
    inferred = memory("mem_a", importance=0.8, confidence=0.7)
    said = memory("mem_b", importance=0.8, confidence=1.0)
    ranked = rank([inferred, said], strategy="scored", now=NOW)
    assert [r.memory.id for r in ranked] == ["mem_b", "mem_a"]


def test_scored_uses_relevance_and_zero_without_one() -> None:
    items = [memory("mem_a"), memory("mem_b"), memory("mem_c")]
    ranked = rank(items, strategy="scored", now=NOW, relevance={"mem_c": 0.9, "mem_b": 0.2})
    assert [r.memory.id for r in ranked] == ["mem_c", "mem_b", "mem_a"]
    assert ranked[0].score == ranked[0].breakdown.composite
    assert ranked[-1].breakdown.relevance == 0.0


def test_recent_orders_by_access_newest_first() -> None:
    items = [memory("mem_a", accessed=5), memory("mem_b", accessed=1), memory("mem_c", accessed=3)]
    ranked = rank(items, strategy="recent", now=NOW)
    assert [r.memory.id for r in ranked] == ["mem_b", "mem_c", "mem_a"]


def test_important_orders_by_raw_importance() -> None:
    items = [
        memory("mem_a", importance=0.5),
        memory("mem_b", importance=0.9, confidence=0.1),  # confidence does not count here
        memory("mem_c", importance=0.7),
    ]
    ranked = rank(items, strategy="important", now=NOW)
    assert [(r.memory.id, r.score) for r in ranked] == [
        ("mem_b", 0.9),
        ("mem_c", 0.7),
        ("mem_a", 0.5),
    ]


def test_balanced_orders_by_the_adr_formula() -> None:
    items = [
        memory("mem_a", importance=0.9, created=8),  # 0.9 / 9 = 0.1
        memory("mem_b", importance=1.0, created=1),  # 1.0 / 2 = 0.5
        memory("mem_c", importance=0.3, created=0),  # 0.3 / 1 = 0.3
    ]
    ranked = rank(items, strategy="balanced", now=NOW)
    assert [r.memory.id for r in ranked] == ["mem_b", "mem_c", "mem_a"]
    assert [r.score for r in ranked] == pytest.approx([0.5, 0.3, 0.1])


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_ties_are_broken_by_id(strategy: Strategy) -> None:
    twins = [memory(i) for i in ("mem_b", "mem_c", "mem_a")]
    assert [r.memory.id for r in rank(twins, strategy=strategy, now=NOW)] == [
        "mem_a",
        "mem_b",
        "mem_c",
    ]


def test_an_unknown_strategy_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown strategy"):
        rank([memory()], strategy="newest", now=NOW)  # type: ignore[arg-type]


unit = st.floats(0.0, 1.0)
hours = st.floats(-1_000.0, 100_000.0)
any_float = st.floats(allow_nan=True, allow_infinity=True)


@given(unit, unit, st.integers(0, 10**9), hours, any_float)
def test_composite_stays_in_the_unit_interval(
    importance: float, confidence: float, count: int, since: float, relevance: float
) -> None:
    item = memory(importance=importance, confidence=confidence, access_count=count, accessed=since)
    breakdown = score_memory(item, relevance=relevance, now=NOW)
    for part in (breakdown.relevance, breakdown.importance, breakdown.recency):
        assert 0.0 <= part <= 1.0
    assert 0.0 <= breakdown.frequency <= 1.0
    assert 0.0 <= breakdown.composite <= 1.0


memories = st.lists(
    st.builds(
        memory,
        st.sampled_from([f"mem_{n}" for n in range(30)]),
        importance=st.sampled_from([0.2, 0.5, 0.8]),
        confidence=st.sampled_from([0.7, 1.0]),
        access_count=st.integers(0, 20),
        created=st.sampled_from([0.0, 1.0, 30.0]),
        accessed=st.sampled_from([0.0, 1.0, 30.0]),
    ),
    max_size=12,
    unique_by=lambda m: m.id,
)


@settings(max_examples=200)
@given(memories, st.sampled_from(STRATEGIES), st.randoms(use_true_random=False))
def test_rank_is_a_total_order_that_ignores_input_order(
    items: list[MemoryRecord], strategy: Strategy, rng: random.Random
) -> None:
    relevance = {m.id: (int(m.id[4:]) % 4) / 4 for m in items}
    ranked = rank(items, strategy=strategy, now=NOW, relevance=relevance)
    shuffled = list(items)
    rng.shuffle(shuffled)
    again = rank(shuffled, strategy=strategy, now=NOW, relevance=relevance)
    assert [r.memory.id for r in again] == [r.memory.id for r in ranked]
    assert sorted(r.memory.id for r in ranked) == sorted(m.id for m in items)
    for better, worse in pairwise(ranked):
        assert better.score > worse.score or better.memory.id < worse.memory.id


@settings(max_examples=200)
@given(unit, unit, st.integers(0, 500), hours, any_float, st.sampled_from(STRATEGIES), unit, unit)
def test_rank_scores_exactly_as_score_memory(
    importance: float,
    confidence: float,
    count: int,
    since: float,
    relevance: float,
    strategy: Strategy,
    w_rel: float,
    half_life: float,
) -> None:
    """The components rank reports are score_memory's, for every strategy."""
    item = memory(importance=importance, confidence=confidence, access_count=count, accessed=since)
    weights = Weights(relevance=w_rel, importance=0.3, recency=0.2, frequency=0.1)
    half_life_hours = 1.0 + 500 * half_life
    (ranked,) = rank(
        [item],
        strategy=strategy,
        now=NOW,
        relevance={item.id: relevance},
        weights=weights,
        half_life_hours=half_life_hours,
    )
    assert ranked.breakdown == score_memory(
        item, relevance=relevance, now=NOW, weights=weights, half_life_hours=half_life_hours
    )


def test_the_lexical_weight_follows_the_embedder() -> None:
    from memlane.config.settings import load_settings
    from memlane.pipeline.ranking.scoring import default_lexical_weight
    from memlane.workers.embedders import get_embedder

    hashing = get_embedder(load_settings(embedding_model="hashing"))
    assert hashing.lexical and default_lexical_weight(hashing.lexical) == 0.7
    assert default_lexical_weight(False) == 0.3  # a semantic embedder's cosine leads
