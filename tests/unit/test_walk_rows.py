"""walk_rows.in_order: the assembler's order of rows, a chunk at a time, from the view's
keys where they decide and the assembler's own key where they are tied or within noise."""

from __future__ import annotations

from unittest import mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from memlane.pipeline.assembly import walk_rows
from memlane.pipeline.assembly.walk_rows import Ranking


class _View:
    def __init__(self, n: int) -> None:
        self.kind = np.zeros(n, dtype=np.int8)


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(st.sampled_from([0.1, 0.2, 0.2, 0.3, 0.5]), min_size=1, max_size=80),
    noise=st.lists(st.sampled_from([0.0, 1e-16, -1e-16, 3e-17]), min_size=80, max_size=80),
    groups=st.lists(st.sampled_from([0.0, 1.0]), min_size=80, max_size=80),
    chunk=st.sampled_from([1, 2, 3, 32]),
    seed=st.integers(0, 1000),
)
def test_chunks_put_together_are_the_assemblers_order(values, noise, groups, chunk, seed):
    n = len(values)
    # the assembler's values, and the view's: the same but for a few units in the last
    # place (a noisy key); ties by row id, as the assembler breaks them by id
    true = np.array(values)
    noisy = true + np.array(noise[:n])
    group = np.array(groups[:n])
    rows = np.sort(np.random.default_rng(seed).choice(200, size=n, replace=False)).astype(np.intp)
    assembler = dict(
        zip(rows.tolist(), zip(group.tolist(), (-true).tolist(), strict=True), strict=True)
    )
    keys = np.zeros((2, 200))  # the view's keys, by row
    keys[0, rows], keys[1, rows] = group, -noisy
    ranking = Ranking((keys[0], keys[1]), (False, True), (keys[0], keys[1]))

    def exact(ids: list[int]) -> list[tuple[object, ...]]:
        return [(*assembler[i], i) for i in ids]

    with mock.patch.object(walk_rows, "FIRST_CHUNK", chunk):
        chunks = list(walk_rows.in_order(_View(200), rows, ranking, exact))
    got = rows[np.concatenate(chunks)].tolist()
    assert got == sorted(rows.tolist(), key=lambda r: (*assembler[r], r))
    assert len(chunks[0]) >= min(chunk, n)
