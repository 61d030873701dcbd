"""The part of a user's view the assembler walks (pipeline.ranking.user_view ranks it all).

A shortlist holds every pinned and verified memory, and the best of the rest in the
assembler's own order (assembly rule 4 with a query, the strategy's order without one):
at most `limit`, and with a budget, as many as it takes for their lines, estimated from
each item's length, to fill `walk_margin` budgets, so the assembler's walk usually ends
before the shortlist does; pipeline.assembly.exact_walk walks on past it when it does not, with
the ranked rows the shortlist leaves (`Shortlist.rest`). Only the rows kept are sorted
(pipeline.ranking.top_k). Of the memories the safety filter leaves out (expired, sensitive),
those the walk would have reached come too, so the pack names what was kept out of this
context; naming every one, on every assembly, made the pack of a 100k user list ~2,000
of them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import numpy.typing as npt

from memlane.pipeline.assembly import walk_rows
from memlane.pipeline.assembly.budget import MIN_MEMORY_LINE_TOKENS
from memlane.pipeline.ranking.scoring import Strategy, Weights
from memlane.pipeline.ranking.top_k import lexicographic_top_of
from memlane.pipeline.ranking.user_view import MEMORY, PROCEDURE, FloatArray, UserView, epoch
from memlane.pipeline.records import EpisodeRecord, MemoryRecord, Procedure

# The ranked part of a shortlist ends where its lines, estimated from each item's length
# (a quarter token per character, plus the style's least markup), add up to `walk_margin`
# budgets (MEMLANE_WALK_MARGIN): far enough that the walk seldom has to go on past it
# (pipeline.assembly.exact_walk), each going on costing a second assembly. Never fewer than
# MIN_WALK items.
MIN_WALK = 50


@dataclass(frozen=True, slots=True)
class Shortlist:
    memories: list[MemoryRecord]
    episodes: list[EpisodeRecord]
    procedures: list[Procedure]
    relevance: dict[str, float]
    # For pipeline.assembly.exact_walk: the ranked rows not walked; the ids of those walked though
    # the ranking may put them after a row not walked (`added`); the ranking's keys; the
    # rows the shortlist holds; the excluded memories' rows.
    rest: npt.NDArray[np.intp] = field(default_factory=lambda: np.empty(0, np.intp), compare=False)
    added: frozenset[str] = frozenset()
    ranking: walk_rows.Ranking | None = field(default=None, compare=False)
    kept: tuple[int, ...] = ()
    excluded: npt.NDArray[np.intp] = field(
        default_factory=lambda: np.empty(0, np.intp), compare=False
    )
    scores: FloatArray | None = field(default=None, compare=False)  # each row's, as given


def _ordered_before(
    keys: Sequence[FloatArray], rows: npt.NDArray[np.intp], last: int
) -> npt.NDArray[np.intp]:
    """The `rows` whose keys come before those of row `last` in lexicographic order
    (keys[0] the most significant; ties by row, as `lexicographic_top` breaks them)."""
    before = rows < last
    for key in reversed(keys):
        mine, theirs = key[rows], key[last]
        before = (mine < theirs) | ((mine == theirs) & before)
    return rows[before]


def _walked_count(
    view: UserView, ranked: npt.NDArray[np.intp], walk_tokens: float, style: str
) -> int:
    """How many of `ranked` the assembler may walk: until their estimated lines add up
    to `walk_tokens`, at least MIN_WALK."""
    lines = MIN_MEMORY_LINE_TOKENS[style] + view.chars[ranked] / 4
    enough = int(np.searchsorted(np.cumsum(lines), walk_tokens)) + 1
    return max(MIN_WALK, enough)


def size(view: UserView, budget_tokens: int, style: str, walk_margin: float) -> int:
    """The most ranked items a shortlist can hold: as many as `walk_margin` budgets hold
    at the style's least markup and no text (every item when the margin is 0)."""
    if walk_margin <= 0:
        return len(view.corpus)
    lines = walk_margin * budget_tokens / MIN_MEMORY_LINE_TOKENS[style]
    return max(MIN_WALK, math.ceil(lines) + 1)


def make(
    view: UserView,
    relevance: FloatArray | None,
    *,
    strategy: Strategy,
    now: datetime,
    weights: Weights,
    half_life_hours: float,
    relevance_floor: float,
    include_sensitive: bool,
    limit: int,
    walk_tokens: float | None = None,
    style: str = "default",
    allowed: npt.NDArray[np.bool_] | None = None,
) -> Shortlist:
    """What the assembler needs to see of this user (module docstring). With
    `walk_tokens`, the ranked part ends sooner: where its lines, estimated from each
    item's length in `style`, add up to that many tokens (at least MIN_WALK items).
    `allowed`: the rows a metadata filter passes (pipeline.metadata.masks); the others
    are left out as if not there, kept out of the pack too."""
    rows = len(view.corpus)
    live = view.corpus.live if allowed is None else view.corpus.live & allowed
    rel = np.zeros(rows, dtype=np.float64) if relevance is None else relevance
    # as the assembler reads a relevance (scoring.unit_interval): NaN 0 (fmax passes
    # over it), then clipped
    clipped = np.fmax(rel, 0.0)
    np.minimum(clipped, 1.0, out=clipped)
    # the operations of exp(-ln2 · max(0, hours) / half-life) in their order, in place (at
    # 100k rows each temporary is 0.8 MB of fresh pages)
    recency = np.subtract(epoch(now), view.stated)
    recency /= 3600.0
    np.maximum(recency, 0.0, out=recency)
    np.multiply(-math.log(2), recency, out=recency)
    recency /= half_life_hours
    np.exp(recency, out=recency)
    composite = _composite(view, weights, clipped, recency)
    is_memory = live & (view.kind == MEMORY)
    visible = (view.expires > epoch(now)) & (include_sensitive | ~view.sensitive)
    always = is_memory & ~view.free  # pinned, verified
    excluded = is_memory & view.free & ~visible  # expired or sensitive: the pack's
    extra: set[int] = set()
    # what a composite is computed from: rows equal in all are tied for the assembler
    scored_by = (clipped, view.importance, view.stated, view.confirmations)
    if relevance is not None and strategy == "scored":
        # the assembler's pool: procedures with any relevance (theirs is truthy)
        pool = live & view.free & visible & ((view.kind != PROCEDURE) | (rel != 0))
        best = float(np.where(pool, clipped, 0.0).max(initial=0.0))  # relevance is >= 0
        above = clipped >= relevance_floor * best
        head = pool & above  # ranked before every other row of the pool
        # assembly rule 4: above the floor by composite, then the rest by relevance;
        # composites may differ from the assembler's in their last bits
        primary = (~above).astype(np.float64)
        behind = np.negative(composite)
        secondary = np.where(above, behind, np.negative(clipped))
        ranking = walk_rows.Ranking((primary, secondary, behind), (False, above, True), scored_by)
    else:
        head = None
        pool = view.free & visible & is_memory
        if strategy == "important":
            ranking = walk_rows.Ranking((-view.raw_importance,), (False,), (view.raw_importance,))
        elif strategy == "balanced":
            age = np.maximum(0.0, (epoch(now) - view.created) / 3600.0)
            value = view.raw_importance / (1.0 + age)
            ranking = walk_rows.Ranking((-value,), (True,), (view.raw_importance, view.created))
        else:
            ranking = walk_rows.Ranking((-composite,), (True,), scored_by)
        # every episode: the walk after the memories takes any that fits, oldest too
        extra = set(np.flatnonzero(live & (view.kind != MEMORY)).tolist())
    keys = ranking.keys
    ranked = _top(keys, pool, head, limit)
    if walk_tokens is not None:
        ranked = ranked[: _walked_count(view, ranked, walk_tokens, style)]
    walked, added = walk_rows.walked(
        view,
        pool,
        ranked,
        ranking,
        clipped if relevance is not None and strategy == "scored" else None,
    )
    outside = pool.copy()  # walked rows are the pool's
    outside[walked] = False
    rest = np.flatnonzero(outside)
    before = np.empty(0, np.intp)
    if len(ranked):
        # the excluded memories the walk would have reached: the pack names them
        before = _ordered_before(list(keys), np.flatnonzero(excluded), int(ranked[-1]))
    kept = set(walked.tolist()) | set(np.flatnonzero(always).tolist()) | set(before.tolist())
    keep = sorted(kept | extra)
    return _of_rows(
        view,
        keep,
        relevance,
        rest=rest,
        added=frozenset(view.corpus.ids[i] for i in added),
        ranking=ranking,
        excluded=np.flatnonzero(excluded),
    )


def _composite(
    view: UserView, weights: Weights, clipped: FloatArray, recency: FloatArray
) -> FloatArray:
    """Each row's composite (scoring.score_memories' sum, its terms in its order), in
    place; the frequency term, the same for every query to a view, computed once."""
    frequency = view.derived.get("frequency")
    if frequency is None:  # threads racing here store equal arrays
        frequency = np.minimum(1.0, np.log10(view.confirmations + 1.0) / 2.0)
        view.derived["frequency"] = frequency
    composite = weights.relevance * clipped
    term = np.multiply(weights.importance, view.importance)
    composite += term
    composite += np.multiply(weights.recency, recency, out=term)
    composite += np.multiply(weights.frequency, frequency, out=term)
    return composite


def _top(
    keys: Sequence[FloatArray],
    pool: npt.NDArray[np.bool_],
    head: npt.NDArray[np.bool_] | None,
    limit: int,
) -> npt.NDArray[np.intp]:
    """The `limit` first rows of the `pool` in the order of `keys`, ties by row. The
    `head` rows come first on `keys[0]` and the pool's others share one value of it (the
    rows above the relevance floor, then the rest): the head's best when it has enough,
    else all of it, then the best of the rest by the other keys (a partition of a 100k
    user's pool by a key of two values cost as much as the rest of the selection)."""
    if head is None:
        return lexicographic_top_of(keys, np.flatnonzero(pool), limit)
    first = np.flatnonzero(head)
    if len(first) >= limit:
        return lexicographic_top_of(keys, first, limit)
    rest = np.flatnonzero(pool & ~head)
    return np.concatenate(
        [
            lexicographic_top_of(keys, first, len(first)),
            lexicographic_top_of(keys[1:], rest, limit - len(first)),
        ]
    )


def widen(view: UserView, shortlist: Shortlist, more: npt.NDArray[np.intp]) -> Shortlist:
    """`shortlist` with the ranked rows `more` too, and the excluded memories ranked
    before the last of them."""
    assert shortlist.ranking is not None  # a shortlist of rows not walked has one
    keys = shortlist.ranking.keys
    last = int(more[np.lexsort(tuple(key[more] for key in reversed(keys)))[-1]])
    before = _ordered_before(list(keys), shortlist.excluded, last)
    keep = sorted(set(shortlist.kept) | set(more.tolist()) | set(before.tolist()))
    return _of_rows(
        view,
        keep,
        shortlist.scores,
        rest=np.empty(0, np.intp),
        added=shortlist.added,
        ranking=shortlist.ranking,
        excluded=shortlist.excluded,
    )


def extension(view: UserView, shortlist: Shortlist, more: npt.NDArray[np.intp]) -> Shortlist:
    """What `widen(view, shortlist, more)` holds that `shortlist` does not."""
    assert shortlist.ranking is not None  # a shortlist of rows not walked has one
    keys = shortlist.ranking.keys
    last = int(more[np.lexsort(tuple(key[more] for key in reversed(keys)))[-1]])
    before = _ordered_before(list(keys), shortlist.excluded, last)
    new = sorted((set(more.tolist()) | set(before.tolist())) - set(shortlist.kept))
    return _of_rows(
        view,
        new,
        shortlist.scores,
        rest=np.empty(0, np.intp),
        added=frozenset(),
        ranking=shortlist.ranking,
        excluded=shortlist.excluded,
    )


def _of_rows(
    view: UserView,
    keep: list[int],
    relevance: FloatArray | None,
    *,
    rest: npt.NDArray[np.intp],
    added: frozenset[str],
    ranking: walk_rows.Ranking | None,
    excluded: npt.NDArray[np.intp],
) -> Shortlist:
    ids = view.corpus.ids
    chosen = [view.records[i] for i in keep]
    return Shortlist(
        memories=[r for r in chosen if isinstance(r, MemoryRecord)],
        episodes=[r for r in chosen if isinstance(r, EpisodeRecord)],
        procedures=[r for r in chosen if isinstance(r, Procedure)],
        relevance={} if relevance is None else {ids[i]: float(relevance[i]) for i in keep},
        rest=rest,
        added=added,
        ranking=ranking,
        kept=tuple(keep),
        excluded=excluded,
        scores=relevance,
    )
