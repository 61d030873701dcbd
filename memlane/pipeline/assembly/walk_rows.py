"""Which ranked rows a working set's first walk takes (pipeline.assembly.exact_walk): its
shortlist's best rows, and the few rows the assembler may order before the last of them or needs
to see.

The view ranks with numpy what the assembler ranks again in Python, item by item: the
same keys, but a recency or an age computed from epoch floats and numpy's `exp` may
differ from the assembler's in the last bits, and the view breaks ties by row where the
assembler breaks them by section and id. So the rows near the cut (a composite within a
billionth of the last row's, or tied with it and ordered before it by id) are walked
too. And with a query the assembler needs two rows whatever the cut: the pool's most
relevant item (its relevance floor is relative to the best it sees) and, when the pool
holds memories, one (its `no_candidates_fit` event counts them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from memlane.pipeline.ranking.top_k import lexicographic_top

Rows = npt.NDArray[np.intp]
FloatArray = npt.NDArray[np.float64]

# How far a noisy key may be from the assembler's value of it, relative to the key's
# size (the difference is a few units in the last place, ~1e-16).
TOLERANCE = 1e-9

# The rows `in_order` orders first: the walk on past a shortlist (pipeline.assembly.exact_walk)
# takes one or two rows at the median, of the ~2,800 its bound lets through at 10k.
FIRST_CHUNK = 32


class Ranked(Protocol):
    @property
    def kind(self) -> npt.NDArray[np.int8]: ...

    @property
    def corpus(self) -> _Ids: ...


class _Ids(Protocol):
    @property
    def ids(self) -> Sequence[str]: ...


def walked(
    view: Ranked,
    pool: npt.NDArray[np.bool_],
    ranked: Rows,
    ranking: Ranking,
    relevance: FloatArray | None,
) -> tuple[Rows, Rows]:
    """The rows to walk (`ranked` first) and those of them that a row not walked may come
    before in the assembler's order (module docstring). `relevance`: the clipped
    relevance when the walk is by relevance; `pool`: which rows the ranking ranked.

    Only the rows that can be near or tied are compared key by key: those within reach
    of the last row on the two most significant keys, and those with all its inputs (a
    gather of every key over a 100k user's pool cost more than the rest of the choice)."""
    if len(ranked) == 0 or len(ranked) == np.count_nonzero(pool):
        return ranked, np.empty(0, np.intp)
    last = int(ranked[-1])
    outside = pool.copy()  # the pool's rows not walked
    outside[ranked] = False
    tied = _tied(ranking.inputs, last)  # a few rows
    walked_tied = pool[tied] & ~outside[tied]  # of the pool, not outside: ranked
    before = _before_last_tied(view, tied[outside[tied]], tied[walked_tied])
    others = _within_reach(ranking, outside, last)
    near = np.zeros(len(others), dtype=np.bool_)
    for key, noisy in zip(reversed(ranking.keys), reversed(ranking.noisy), strict=True):
        gap = key[others] - key[last]
        # rows before `last` on a more significant key share its value there: the last
        # row's own noise says which
        if noisy if isinstance(noisy, bool) else bool(noisy[last]):
            near = gap <= TOLERANCE * max(1.0, abs(float(key[last])))
        else:
            near = (gap < 0) | ((gap == 0) & near)
    tied_rows = set(tied.tolist())
    added = np.array([row for row in others[near].tolist() if row not in tied_rows], np.intp)
    if relevance is not None:
        needed = _needed(view, pool, ranked, outside, ranking.keys, relevance)
        added = np.union1d(added, needed)
    rows = np.concatenate([ranked, before, added]).astype(np.intp)
    return np.unique(rows), added.astype(np.intp)


def _within_reach(ranking: Ranking, outside: npt.NDArray[np.bool_], last: int) -> Rows:
    """The `outside` rows that may come before row `last` or near it, by `walked`'s
    comparison of the two most significant keys over every row: on a key noisy for the
    last row, within the tolerance of its value (the less significant keys do not
    count); on another, before it, or equal and in reach on the next key."""
    reach = outside
    for depth in reversed(range(min(2, len(ranking.keys)))):
        key, noisy = ranking.keys[depth], ranking.noisy[depth]
        if noisy if isinstance(noisy, bool) else bool(noisy[last]):
            reach = key - key[last] <= TOLERANCE * max(1.0, abs(float(key[last])))
        elif depth == len(ranking.keys) - 1:
            reach = key <= key[last]  # gap <= 0, for finite keys
        else:
            # gap < 0, or gap == 0 and in reach on the next key (for finite keys)
            reach = (key < key[last]) | ((key == key[last]) & reach)
    return np.flatnonzero(reach & outside)


@dataclass(frozen=True, slots=True)
class Ranking:
    """The view's sort keys (keys[0] the most significant), which of them it computes
    otherwise than the assembler, and the per-row values the keys are computed from (rows
    equal in all of them are tied for the assembler too)."""

    keys: tuple[FloatArray, ...]
    noisy: tuple[bool | npt.NDArray[np.bool_], ...]  # per key, or per row of a key
    inputs: tuple[FloatArray, ...]


def _tied(inputs: Sequence[FloatArray], last: int) -> Rows:
    """The rows tied with row `last`: the same value in every input (ascending)."""
    rows = np.flatnonzero(inputs[0] == inputs[0][last])
    for column in inputs[1:]:
        rows = rows[column[rows] == column[last]]
    return rows


def _before_last_tied(view: Ranked, outside: Rows, walked: Rows) -> Rows:
    """Of the tied rows not walked (`outside`), those the assembler orders (by section,
    then id) before the last of the tied rows walked (`walked`)."""
    ids, kind = view.corpus.ids, view.kind
    mark = max((int(kind[row]), ids[row]) for row in walked.tolist())
    return np.array(
        [row for row in outside.tolist() if (int(kind[row]), ids[row]) < mark], dtype=np.intp
    )


def _needed(
    view: Ranked,
    pool: npt.NDArray[np.bool_],
    ranked: Rows,
    outside: npt.NDArray[np.bool_],
    keys: Sequence[FloatArray],
    relevance: FloatArray,
) -> Rows:
    """The rows a walk by relevance needs besides `ranked`: the most relevant of the pool
    and its best memory, when `ranked` (the rest: `outside`) lacks them."""
    needed: list[int] = []
    best = np.where(pool, relevance, -np.inf).max(initial=-np.inf)  # faster than a gather
    if not (relevance[ranked] == best).any():
        others = np.flatnonzero(outside)
        needed.append(int(others[np.argmax(relevance[others])]))
    if not (view.kind[ranked] == 0).any():
        memories = np.flatnonzero(outside & (view.kind == 0))
        if len(memories):
            first = lexicographic_top([key[memories] for key in keys], 1)
            needed.append(int(memories[first[0]]))
    return np.array(needed, dtype=np.intp)


def in_order(
    view: Ranked,
    rows: Rows,
    ranking: Ranking,
    exact: Callable[[list[int]], list[tuple[object, ...]]],
) -> Iterator[Rows]:
    """The positions in `rows` of its rows in the assembler's order, a chunk at a time
    (FIRST_CHUNK rows, then four times as many each time): a walk that stops after a few
    rows (pipeline.assembly.exact_walk) sorts no more than those. The view's keys order the rows
    but where two rows' keys are within the noise of each other or tied: there `exact`
    (the assembler's own sort key of each row, ties broken as it breaks them) orders
    each run of such rows. A chunk never ends inside such a run, so each is the next
    part of one order of all `rows`."""
    keys, noisy = ranking.keys, ranking.noisy
    left = np.arange(len(rows))
    size = FIRST_CHUNK
    while len(left):
        top = lexicographic_top([key[rows[left]] for key in keys], size)
        chunk = left[top]  # the next `size` rows by the view's keys, in that order
        outside = np.ones(len(left), dtype=np.bool_)
        outside[top] = False
        left = left[outside]
        # the rows after the chunk that are unsure with its last join it
        while len(left):
            after = int(lexicographic_top([key[rows[left]] for key in keys], 1)[0])
            pair = rows[[chunk[-1], left[after]]]
            if not _unsure(keys, noisy, pair[:1], pair[1:])[0]:
                break
            chunk = np.append(chunk, left[after])
            left = np.delete(left, after)
        yield _settled(rows, chunk, _unsure(keys, noisy, rows[chunk[:-1]], rows[chunk[1:]]), exact)
        size *= 4


def _unsure(
    keys: Sequence[FloatArray],
    noisy: Sequence[bool | npt.NDArray[np.bool_]],
    first: Rows,
    second: Rows,
) -> npt.NDArray[np.bool_]:
    """Of pairs of rows, `second[i]` after `first[i]` by the view's keys, those the view
    cannot order: tied on every key, or near on a noisy key where the more significant
    keys are equal."""
    undecided = np.ones(len(first), dtype=np.bool_)
    unsure = np.zeros(len(first), dtype=np.bool_)
    for key, per_key in zip(keys, noisy, strict=True):
        gap = key[second] - key[first]
        fuzzy = np.broadcast_to(per_key if isinstance(per_key, bool) else per_key[first], gap.shape)
        near = gap <= TOLERANCE * np.maximum(1.0, np.abs(key[first]))
        unsure |= undecided & fuzzy & near
        undecided &= gap == 0
    return unsure | undecided  # tied on every key


def _settled(
    rows: Rows,
    chunk: Rows,
    unsure: npt.NDArray[np.bool_],
    exact: Callable[[list[int]], list[tuple[object, ...]]],
) -> Rows:
    """`chunk` (positions in `rows`, in the view's order) with each run of rows joined by
    `unsure` pairs ordered by `exact`."""
    if not unsure.any():
        return chunk
    ordered = chunk.tolist()
    # each run of rows joined by unsure pairs: rows i..j with pairs i..j-1 unsure
    edges = np.diff(np.concatenate([[0], unsure.astype(np.int8), [0]]))
    for start, end in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1), strict=True):
        run = ordered[start : end + 1]
        ids = rows[run].tolist()
        ordered[start : end + 1] = [at for *_, at in sorted(zip(exact(ids), ids, run, strict=True))]
    return np.array(ordered, dtype=np.intp)
