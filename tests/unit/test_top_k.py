"""lexicographic_top is the head of a full lexicographic sort, ties by index included."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from memlane.pipeline.ranking.top_k import lexicographic_top, lexicographic_top_of

# few distinct values, so that ties at the cut (on one key or all of them) are the rule
values = st.sampled_from([0.0, -0.0, 0.25, 0.5, 1.0, -1.0, 3.0])


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(st.tuples(values, values, values), max_size=60),
    k=st.integers(min_value=0, max_value=70),
    width=st.integers(min_value=1, max_value=3),
)
def test_it_is_the_head_of_a_full_lexicographic_sort(rows, k, width) -> None:
    keys = [np.array([row[i] for row in rows], dtype=np.float64) for i in range(width)]
    expected = np.lexsort(tuple(reversed(keys)))[:k] if rows else np.empty(0, dtype=np.intp)
    assert lexicographic_top(keys, k).tolist() == expected.tolist()


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(st.tuples(values, values, values, st.booleans()), max_size=60),
    k=st.integers(min_value=0, max_value=70),
    width=st.integers(min_value=1, max_value=3),
)
def test_the_top_of_some_rows_is_the_top_of_those_rows_keys(rows, k, width) -> None:
    keys = [np.array([row[i] for row in rows], dtype=np.float64) for i in range(width)]
    chosen = np.array([i for i, row in enumerate(rows) if row[3]], dtype=np.intp)
    expected = chosen[lexicographic_top([key[chosen] for key in keys], k)]
    assert lexicographic_top_of(keys, chosen, k).tolist() == expected.tolist()


def test_a_large_tie_at_the_cut_is_broken_by_the_next_key_then_by_index() -> None:
    first = np.zeros(1000)
    first[[7, 500]] = -1.0  # the two best rows
    second = np.ones(1000)
    second[[900, 3, 10]] = 0.0  # the best of the tied rest
    assert lexicographic_top([first, second], 6).tolist() == [7, 500, 3, 10, 900, 0]
