"""Scoring and ranking strategies. Pure: the clock and the weights come in as arguments.

composite = w_rel · relevance + w_imp · importance' + w_rec · recency + w_freq · frequency
with the default weights 0.40 / 0.30 / 0.20 / 0.10.

Recency and frequency come from what the user said: recency from `confirmed_at` (when
the memory was last stated or confirmed, a message's time), frequency from
`access_count` (its confirmations). Being shown in a context moves only `accessed_at`,
which `recent` orders by and `scored` never reads: a ranking that fed on its own output
would show the same memories whatever the query.

Confidence: importance' = importance × (0.5 + 0.5 × confidence). An explicit statement
(confidence 1.0) keeps its full importance; an inference (confidence 0.7) of equal
importance counts 85% of it, so between two otherwise equal memories the one the user
said outranks the one the extractor inferred.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, NamedTuple

from memlane.pipeline.ranking.lexical import normalise_by_max
from memlane.pipeline.records import MemoryRecord

Strategy = Literal["scored", "recent", "important", "balanced"]
STRATEGIES: tuple[Strategy, ...] = ("scored", "recent", "important", "balanced")

# What an episode or a procedure weighs in the composite's importance term: the middle
# of the extraction guide's "useful" band; they carry no importance of their own.
ITEM_IMPORTANCE = 0.5


@dataclass(frozen=True, slots=True)
class Weights:
    """The composite's weights. No defaults here: memlane.config.settings holds them
    (MEMLANE_WEIGHTS__*), and callers pass them in."""

    relevance: float
    importance: float
    recency: float
    frequency: float


# Named tuples, not frozen dataclasses: the assembler makes one of each per memory it
# walks, and a frozen dataclass's __init__ (object.__setattr__ per field) cost twice a
# tuple's; immutable either way.
class ScoreBreakdown(NamedTuple):
    relevance: float
    importance: float
    recency: float
    frequency: float
    composite: float


class RankedMemory(NamedTuple):
    memory: MemoryRecord
    score: float  # the strategy's sort value (the composite for "scored")
    breakdown: ScoreBreakdown


def _hours_between(earlier: datetime, later: datetime) -> float:
    return max(0.0, (later - earlier).total_seconds() / 3600.0)


def recency_score(confirmed_at: datetime, *, now: datetime, half_life_hours: float) -> float:
    """exp(−ln2 · hours since last stated or confirmed / half_life): 1.0 now, 0.5 after
    one half-life."""
    return math.exp(-math.log(2) * _hours_between(confirmed_at, now) / half_life_hours)


def frequency_score(access_count: int) -> float:
    """min(1, log10(access_count + 1) / 2): 0 at 0, 0.5 at 9, 1.0 at 99 and above."""
    return min(1.0, math.log10(max(0, access_count) + 1) / 2.0)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity clipped to [0, 1] (an opposite vector is as irrelevant as an
    orthogonal one); 0 when either vector is empty, zero or of another dimension."""
    if not a or not b or len(a) != len(b):
        return 0.0
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    if norm == 0.0:
        return 0.0
    return unit_interval(dot / norm)


def unit_interval(value: float) -> float:
    """value clipped to [0, 1]; NaN (a vector with NaN or inf in it) counts as 0, never
    as a perfect match (min(1.0, nan) is 1.0 in Python)."""
    if math.isnan(value):
        return 0.0
    return max(0.0, min(1.0, value))


def hybrid_relevance(cosine: float, lexical: float | None, weight: float) -> float:
    """relevance = (1 − w) · cosine + w · lexical, with w = `weight` (settings
    `hybrid_lexical_weight`, default `default_lexical_weight`) and lexical in [0, 1]
    (`memlane.pipeline.ranking.lexical.normalise_by_max`: the query's best lexical match among the
    candidates is 1). `lexical` None means the query has no lexical signal at all (no
    candidate shares a word with it): relevance is then the cosine alone, so a query
    that matches nothing word for word keeps relevance's full 40% share instead of
    70% of it. The blend replaces relevance inside the composite; the composite's
    weights do not change. Inputs are clipped to [0, 1] (NaN → 0), and so is w."""
    cosine = unit_interval(cosine)
    if lexical is None:
        return cosine
    w = unit_interval(weight)
    return (1.0 - w) * cosine + w * unit_interval(lexical)


def blend_relevance(
    memory_ids: Iterable[str],
    cosine: Mapping[str, float],
    lexical: Mapping[str, float],
    weight: float,
) -> dict[str, float]:
    """Each memory's relevance to one query: `hybrid_relevance` of its cosine (0 without
    one) and its raw lexical score (BM25 or ts_rank_cd) over `normalise_by_max` of the
    set's. When no memory shares a word with the query there is no lexical signal: the
    cosines as they are, for the memories that have one."""
    normalised = normalise_by_max(lexical)
    if not normalised:
        return dict(cosine)
    return {
        memory_id: hybrid_relevance(
            cosine.get(memory_id, 0.0), normalised.get(memory_id, 0.0), weight
        )
        for memory_id in memory_ids
    }


# relevance = (1 − w)·cosine + w·lexical: which signal leads depends on the embedder.
SEMANTIC_EMBEDDER_LEXICAL_WEIGHT = 0.3
LEXICAL_EMBEDDER_LEXICAL_WEIGHT = 0.7


def default_lexical_weight(lexical_embedder: bool) -> float:
    """w of `hybrid_relevance` when the operator did not set one. A semantic embedder
    (minilm, an API model) brings what words cannot (synonyms, paraphrase), so its cosine
    leads (0.3). The hashing embedder's cosine is a word-overlap signal without
    inverse document frequency: a name in every memory weighs as much as the one rare
    word the question is about, so BM25, which weighs words by their rarity in the
    user's store, leads (0.7) and the cosine (word pairs) breaks its ties."""
    return LEXICAL_EMBEDDER_LEXICAL_WEIGHT if lexical_embedder else SEMANTIC_EMBEDDER_LEXICAL_WEIGHT


def effective_importance(importance: float, confidence: float) -> float:
    """importance × (0.5 + 0.5 × confidence): see the module docstring."""
    return importance * (0.5 + 0.5 * confidence)


def balanced_score(importance: float, created_at: datetime, *, now: datetime) -> float:
    """HTM ADR-006 `balanced`: importance × 1 / (1 + hours since added)."""
    return importance / (1.0 + _hours_between(created_at, now))


def score_memory(
    memory: MemoryRecord,
    *,
    relevance: float,
    now: datetime,
    weights: Weights,
    half_life_hours: float,
) -> ScoreBreakdown:
    """The composite score and its components. `relevance` comes in already computed
    (cosine, or the hybrid blend) so this stays independent of how vectors are stored;
    it is clipped to [0, 1] (NaN → 0) so one bad score cannot dominate or break the sort."""
    return score_item(
        relevance=relevance,
        importance=effective_importance(memory.importance, memory.confidence),
        stated_at=memory.confirmed_at,
        confirmations=memory.access_count,
        now=now,
        weights=weights,
        half_life_hours=half_life_hours,
    )


def score_item(
    *,
    relevance: float,
    importance: float,
    stated_at: datetime,
    confirmations: int,
    now: datetime,
    weights: Weights,
    half_life_hours: float,
) -> ScoreBreakdown:
    """The composite of any item: `importance` already weighed by confidence for a
    memory, the neutral ITEM_IMPORTANCE for an episode or a procedure; recency from
    `stated_at`; frequency from `confirmations`."""
    relevance = unit_interval(relevance)
    recency = recency_score(stated_at, now=now, half_life_hours=half_life_hours)
    frequency = frequency_score(confirmations)
    composite = (
        weights.relevance * relevance
        + weights.importance * importance
        + weights.recency * recency
        + weights.frequency * frequency
    )
    return ScoreBreakdown(relevance, importance, recency, frequency, composite)


def score_memories(
    memories: Sequence[MemoryRecord],
    *,
    relevance: Mapping[str, float],
    now: datetime,
    weights: Weights,
    half_life_hours: float,
) -> list[ScoreBreakdown]:
    """`score_memory` of each memory (relevance 0 for one without), in one loop: the
    assembler scores every memory it walks on every call, and the helpers' calls were
    most of that cost. The arithmetic is theirs, operation for operation, so the floats
    are the same (test_scoring checks it)."""
    w_rel, w_imp = weights.relevance, weights.importance
    w_rec, w_freq = weights.recency, weights.frequency
    minus_ln2 = -math.log(2)
    log10, exp = math.log10, math.exp
    frequencies: dict[int, float] = {}  # by access count: a few distinct counts
    breakdowns: list[ScoreBreakdown] = []
    for memory in memories:
        rel = relevance.get(memory.id, 0.0)
        # unit_interval's value, without its calls: NaN, negatives and -0.0 are 0.0
        if not rel > 0.0:
            rel = 0.0
        elif rel >= 1.0:
            rel = 1.0
        importance = memory.importance * (0.5 + 0.5 * memory.confidence)
        hours = (now - memory.confirmed_at).total_seconds() / 3600.0
        if not hours > 0.0:
            hours = 0.0
        recency = exp(minus_ln2 * hours / half_life_hours)
        count = memory.access_count
        frequency = frequencies.get(count)
        if frequency is None:
            frequency = frequencies[count] = min(1.0, log10(max(0, count) + 1) / 2.0)
        composite = w_rel * rel + w_imp * importance + w_rec * recency + w_freq * frequency
        breakdowns.append(ScoreBreakdown(rel, importance, recency, frequency, composite))
    return breakdowns


def rank(
    memories: Iterable[MemoryRecord],
    *,
    strategy: Strategy,
    now: datetime,
    relevance: Mapping[str, float] | None = None,
    weights: Weights,
    half_life_hours: float,
    ordered: bool = True,
) -> list[RankedMemory]:
    """Order memories by a strategy, best first. Ties are broken by id, so the order is
    total and does not depend on the input order. `ordered=False`: scored, in the input
    order (for a caller that orders them by its own key).

    - scored: the composite (relevance 0 for memories without one, e.g. no query)
    - recent: accessed_at, newest first
    - important: importance, highest first
    - balanced: importance / (1 + hours since created)
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of {STRATEGIES}")
    memories = list(memories)
    breakdowns = score_memories(
        memories,
        relevance=relevance or {},
        now=now,
        weights=weights,
        half_life_hours=half_life_hours,
    )
    ranked: list[tuple[float, str, RankedMemory]] = []
    for memory, breakdown in zip(memories, breakdowns, strict=True):
        if strategy == "scored":
            value = breakdown.composite
        elif strategy == "recent":
            value = memory.accessed_at.timestamp()
        elif strategy == "important":
            value = memory.importance
        else:
            value = balanced_score(memory.importance, memory.created_at, now=now)
        ranked.append((-value, memory.id, RankedMemory(memory, value, breakdown)))
    if not ordered:
        return [item for _, _, item in ranked]
    ranked.sort(key=lambda entry: (entry[0], entry[1]))
    return [item for _, _, item in ranked]
