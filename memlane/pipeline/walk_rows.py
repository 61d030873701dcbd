"""Which ranked rows a working set's first walk takes (pipeline.exact_walk): its shortlist's
best rows, and the few rows the assembler may order before the last of them or needs
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

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from memlane.pipeline.top_k import lexicographic_top

Rows = npt.NDArray[np.intp]
FloatArray = npt.NDArray[np.float64]

# How far a noisy key may be from the assembler's value of it, relative to the key's
# size (the difference is a few units in the last place, ~1e-16).
TOLERANCE = 1e-9


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
    pool: Rows,
    ranked: Rows,
    keys: Sequence[FloatArray],
    noisy: Sequence[bool],
    relevance: FloatArray | None,
) -> tuple[Rows, Rows]:
    """The rows to walk (`ranked` first) and those of them added to `ranked` (module
    docstring). `relevance`: the clipped relevance when the walk is by relevance."""
    if len(ranked) == 0 or len(ranked) == len(pool):
        return ranked, np.empty(0, np.intp)
    last = int(ranked[-1])
    outside = np.ones(len(view.kind), dtype=np.bool_)
    outside[ranked] = False
    others = pool[outside[pool]]
    maybe = _tied_before(view, others, keys, last) if not any(noisy) else None
    for key, fuzzy in zip(reversed(keys), reversed(noisy), strict=True):
        gap = key[others] - key[last]
        if fuzzy:
            maybe = gap <= TOLERANCE * max(1.0, abs(float(key[last])))
        else:
            assert maybe is not None  # the least significant key is exact, or set above
            maybe = (gap < 0) | ((gap == 0) & maybe)
    added = others[maybe] if maybe is not None else others[:0]
    if relevance is not None:
        added = np.union1d(added, _needed(view, pool, ranked, others, keys, relevance))
    return np.concatenate([ranked, added]).astype(np.intp), added.astype(np.intp)


def _tied_before(
    view: Ranked, others: Rows, keys: Sequence[FloatArray], last: int
) -> npt.NDArray[np.bool_]:
    """Of `others`, those tied with `last` on every key that the assembler orders before
    it (section, then id)."""
    tied = np.ones(len(others), dtype=np.bool_)
    for key in keys:
        tied &= key[others] == key[last]
    ids, kind = view.corpus.ids, view.kind
    mark = (int(kind[last]), ids[last])
    before = np.zeros(len(others), dtype=np.bool_)
    for i in np.flatnonzero(tied).tolist():
        row = int(others[i])
        before[i] = (int(kind[row]), ids[row]) < mark
    return before


def _needed(
    view: Ranked,
    pool: Rows,
    ranked: Rows,
    others: Rows,
    keys: Sequence[FloatArray],
    relevance: FloatArray,
) -> Rows:
    """The rows a walk by relevance needs besides `ranked`: the most relevant of the pool
    and its best memory, when `ranked` lacks them."""
    needed: list[int] = []
    best = relevance[pool].max()
    if not (relevance[ranked] == best).any():
        needed.append(int(others[np.argmax(relevance[others])]))
    memories = others[view.kind[others] == 0]
    if len(memories) and not (view.kind[ranked] == 0).any():
        first = lexicographic_top([key[memories] for key in keys], 1)
        needed.append(int(memories[first[0]]))
    return np.array(needed, dtype=np.intp)
