"""The first k rows of a lexicographic order without sorting every row: a user's view
ranks its whole store per query, and only the few hundred rows the assembler walks need
to be in order; a partition costs a small fraction of a full `np.lexsort`
(bench/README.md, "Figures behind choices in the code")."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

Rows = npt.NDArray[np.intp]


def lexicographic_top(keys: Sequence[npt.NDArray[np.float64]], k: int) -> Rows:
    """The indices of the `k` smallest rows by `keys` (keys[0] the most significant, ties
    by index), in that order: `np.lexsort(keys[::-1])[:k]`, in linear time plus the sort
    of the k rows kept. Keys hold no NaN."""
    n = len(keys[0]) if keys else 0
    k = max(0, min(k, n))
    if k == 0:
        return np.empty(0, dtype=np.intp)
    chosen = _smallest(keys, np.arange(n), k) if k < n else np.arange(n)
    order = np.lexsort((chosen, *(key[chosen] for key in reversed(keys))))
    return chosen[order]


def lexicographic_top_of(keys: Sequence[npt.NDArray[np.float64]], rows: Rows, k: int) -> Rows:
    """`rows[lexicographic_top([key[rows] for key in keys], k)]` for ascending `rows` of
    the `keys` (the same rows, the same order), gathering only the keys the selection
    reads: the first over `rows`, the others over the rows tied on it and the k kept (a
    100k user's pool gathered three times cost a quarter of the selection)."""
    k = max(0, min(k, len(rows)))
    if k == 0:
        return np.empty(0, dtype=np.intp)
    chosen = _smallest(keys, rows, k) if k < len(rows) else rows
    order = np.lexsort((chosen, *(key[chosen] for key in reversed(keys))))
    return chosen[order]


def _smallest(keys: Sequence[npt.NDArray[np.float64]], rows: Rows, k: int) -> Rows:
    """The `k` smallest of `rows` (ascending indices) by `keys`, ties by index, unordered:
    rows strictly below the k-th value of the first key, and of the rows tied with it the
    smallest by the remaining keys."""
    if len(rows) <= k:
        return rows
    if not keys:
        return rows[:k]
    first = keys[0][rows]
    kth = np.partition(first, k - 1)[k - 1]
    below = rows[first < kth]
    tied = rows[first == kth]
    return np.concatenate([below, _smallest(keys[1:], tied, k - len(below))])
