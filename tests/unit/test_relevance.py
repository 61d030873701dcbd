"""Relevance over a user's whole store: cosine of one embedder blended with BM25."""

from __future__ import annotations

import gc
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlane.pipeline.ranking.corpus import (
    CorpusItem,
    build_corpus,
    patch_corpus,
    rows_of,
    stored_by_component,
)
from memlane.pipeline.ranking.lexical import bm25_scores
from memlane.pipeline.ranking.relevance import bm25, component_dots, cosines, relevance

MODEL = "toy-3"


def corpus(*items: CorpusItem, dim: int | None = 3):
    return build_corpus(list(items), model=MODEL, dim=dim)


def item(item_id: str, words: str = "", vector: list[float] | None = None, model: str = MODEL):
    return CorpusItem(item_id, frozenset(words.split()), vector, model if vector else None)


def test_cosines_compare_only_vectors_of_the_query_embedder() -> None:
    index = corpus(
        item("a", vector=[1, 0, 0]),
        item("b", vector=[1, 1, 0]),
        item("c", vector=[1, 0, 0], model="other-3"),  # another embedder: no cosine
        item("d"),  # no vector at all
        item("e", vector=[0, 0, 0]),  # a zero vector is no direction
        item("f", vector=[-1, 0, 0]),  # opposite: clipped to 0
    )
    sims = cosines(index, [2, 0, 0], MODEL)
    assert sims.tolist() == pytest.approx([1.0, 2**-0.5, 0.0, 0.0, 0.0, 0.0])
    assert cosines(index, [2, 0, 0], "other-3").tolist() == [0.0] * 6
    assert cosines(index, [1, 0], MODEL).tolist() == [0.0] * 6  # another dimension
    assert cosines(index, None, MODEL).tolist() == [0.0] * 6


documents = st.dictionaries(
    st.text(alphabet="xyz", min_size=1, max_size=3),
    st.sets(st.sampled_from("abcdefgh"), max_size=5),
    min_size=1,
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(documents, st.sets(st.sampled_from("abcdefghij"), max_size=4))
def test_bm25_is_pipeline_lexical_bm25_on_keyword_sets(
    docs: dict[str, set[str]], query: set[str]
) -> None:
    index = corpus(*(CorpusItem(k, frozenset(v)) for k, v in docs.items()), dim=None)
    scores = bm25(index, query)
    expected = bm25_scores(query, {k: sorted(v) for k, v in docs.items()})
    for row, key in enumerate(index.ids):
        assert scores[row] == pytest.approx(expected.get(key, 0.0))


def test_a_rare_word_weighs_more_than_a_common_one() -> None:
    index = corpus(
        *(item(f"common{i}", "dance studio") for i in range(8)),
        item("rare", "dance banker"),
        dim=None,
    )
    scores = dict(zip(index.ids, bm25(index, {"banker", "dance"}).tolist(), strict=True))
    assert scores["rare"] > 2 * scores["common0"] > 0


def test_relevance_blends_the_cosine_with_bm25_normalised_by_the_best() -> None:
    index = corpus(
        item("both", "banker job", [1, 0, 0]),
        item("words", "banker", [0, 1, 0]),
        item("vector", "dance", [1, 0, 0]),
    )
    scores = relevance(
        index,
        query_vector=[1, 0, 0],
        query_model=MODEL,
        query_terms={"banker", "job"},
        lexical_weight=0.3,
    )
    lexical = bm25(index, {"banker", "job"})
    normalised = lexical / lexical.max()
    assert scores.tolist() == pytest.approx(
        [0.7 * 1.0 + 0.3 * 1.0, 0.7 * 0.0 + 0.3 * normalised[1], 0.7 * 1.0 + 0.0]
    )


def test_without_a_lexical_match_relevance_is_the_cosine_alone() -> None:
    index = corpus(item("a", "dance", [1, 0, 0]), item("b", "studio", [1, 1, 0]))
    scores = relevance(
        index,
        query_vector=[1, 0, 0],
        query_model=MODEL,
        query_terms={"banker"},
        lexical_weight=0.3,
    )
    assert scores.tolist() == pytest.approx([1.0, 2**-0.5])
    off = relevance(
        index,
        query_vector=[1, 0, 0],
        query_model=MODEL,
        query_terms={"dance"},
        lexical_weight=0.0,
    )
    assert off.tolist() == pytest.approx([1.0, 2**-0.5])


def test_a_non_finite_vector_is_no_vector() -> None:
    index = corpus(item("nan", vector=[math.nan, 1, 0]), item("inf", vector=[math.inf, 0, 0]))
    assert np.all(cosines(index, [1, 0, 0], MODEL) == 0.0)


def test_positions_map_ids_to_rows() -> None:
    index = corpus(item("a"), item("b"), dim=None)
    assert (index.position("b"), index.position("zz"), len(index)) == (1, None, 2)


def test_a_corpus_holds_no_posting_the_garbage_collector_keeps_walking() -> None:
    # a view lives long: a list per word would be walked by every full collection
    index = corpus(item("a", "tea green"), item("b", "tea"), item("c", "coffee"), dim=None)
    gc.collect()
    assert not any(gc.is_tracked(rows) for rows in index.postings.values())
    assert [list(rows_of(index, word)) for word in ("tea", "green", "coffee")] == [
        [0, 1],
        [0],
        [2],
    ]


def _snapshot(corpus):
    return (
        corpus.ids,
        corpus.vectors.copy(),
        {w: list(rows_of(corpus, w)) for w in corpus.postings},
        corpus.lengths.copy(),
        corpus.live.copy(),
    )


def _same(a, b) -> bool:
    return (
        a[0] == b[0]
        and np.array_equal(a[1], b[1])
        and a[2] == b[2]
        and np.array_equal(a[3], b[3])
        and np.array_equal(a[4], b[4])
    )


@pytest.mark.parametrize("by_component", [False, True])
def test_a_patch_leaves_every_earlier_corpus_as_it_was(by_component: bool) -> None:
    # a chain of patches (appends share the vectors' spare rows) and a branch: the same
    # corpus patched twice, which must not write into rows the first patch claimed
    items = [
        CorpusItem(f"m{i}", frozenset({"user", f"w{i % 3}"}), (float(i), 1.0, 0.0), "toy")
        for i in range(6)
    ]
    base = build_corpus(items, model="toy", dim=3, by_component=by_component)
    first, _ = patch_corpus(base, [CorpusItem("m6", frozenset({"tea"}), (0, 0, 1.0), "toy")], [])
    before = [_snapshot(base), _snapshot(first)]
    second, _ = patch_corpus(
        first,
        [
            CorpusItem("m7", frozenset({"user"}), (1.0, 0, 0), "toy"),
            CorpusItem("m1", frozenset({"tea", "w1"}), (1.0, 1.0, 0.0), "toy"),  # same vector
        ],
        ["m2"],
    )
    branch, _ = patch_corpus(first, [CorpusItem("m8", frozenset({"dog"}), (0, 1.0, 0), "toy")], [])
    moved, _ = patch_corpus(second, [CorpusItem("m0", frozenset(), (0, 0, 5.0), "toy")], [])
    assert _same(before[0], _snapshot(base)) and _same(before[1], _snapshot(first))
    assert second.ids[-1] == "m7" and branch.ids[-1] == "m8"
    assert np.allclose(second.vectors[7], [1, 0, 0]) and np.allclose(branch.vectors[7], [0, 1, 0])
    assert np.allclose(moved.vectors[0], [0, 0, 1]) and not np.allclose(
        second.vectors[0], [0, 0, 1]
    )
    # the postings follow the patch: m1 gained "tea", m2 is gone
    assert "m2" not in [second.ids[i] for i in np.flatnonzero(second.live)]
    assert list(rows_of(second, "tea")) == [1, 6]
    assert 2 not in list(rows_of(second, "user")) and 7 in list(rows_of(second, "user"))
    assert "w1" in first.postings and list(rows_of(first, "tea")) == [6]


# Scores of a query's terms summed in the order of a set of strings, whose hashes (and so
# order) differ from one process to the next, differed in the last bit: enough to swap
# two items of nearly equal score, so two processes gave different bytes for one store.
_SCORES_IN_A_FRESH_PROCESS = """
from memlane.pipeline.ranking.lexical import bm25_scores
from memlane.pipeline.ranking.corpus import CorpusItem, build_corpus
from memlane.pipeline.ranking.relevance import bm25
words = [f"w{n}" for n in range(40)]
docs = {f"d{i}": words[i % 7 : i % 7 + 3 + i % 11] for i in range(60)}
items = [CorpusItem(d, frozenset(ws)) for d, ws in docs.items()]
query = words[:25]
print(repr(bm25(build_corpus(items, model=None, dim=None), query).tolist()))
print(repr(sorted(bm25_scores(query, docs).items())))
"""


def test_bm25_sums_the_same_way_in_every_process() -> None:
    outputs = {
        subprocess.run(
            [sys.executable, "-c", _SCORES_IN_A_FRESH_PROCESS],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in range(6)
    }
    assert len(outputs) == 1


def _sequential_dots(rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """The dots `component_dots` promises: float32 products summed one component at a
    time, in ascending order, every component (zeros too)."""
    dots = np.zeros(len(rows), dtype=np.float32)
    for j in range(rows.shape[1]):
        dots = dots + rows[:, j] * query[j]
    return dots


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 40),
    st.integers(1, 24),
    st.floats(0.0, 1.0),
    st.floats(0.0, 1.0),
    st.integers(0, 2**32 - 1),
)
def test_a_query_reads_only_its_components_and_every_row_gets_the_same_bits(
    n: int, dim: int, row_density: float, query_density: float, seed: int
) -> None:
    # a sparse query (hashing) reads a few components of the by-component matrix; the
    # dots must be the sum over every component in order, bit for bit, whatever the
    # row's position (a patched view holds a row elsewhere than a freshly built one)
    rng = np.random.default_rng(seed)
    rows = rng.standard_normal((n, dim)).astype(np.float32)
    rows[rng.random((n, dim)) > row_density] = 0
    query = rng.standard_normal(dim).astype(np.float32)
    query[rng.random(dim) > query_density] = 0
    matrix = stored_by_component(rows)
    assert np.array_equal(matrix, rows) and matrix.T.flags.c_contiguous
    dots = component_dots(matrix, query)
    assert np.array_equal(dots, _sequential_dots(rows, query))
    shifted = component_dots(stored_by_component(np.concatenate([rows[::-1], rows[:3]])), query)
    assert np.array_equal(shifted[:n], dots[::-1])
    assert np.array_equal(component_dots(matrix, np.where(query == 0, 0, query)), dots)


def test_patched_corpora_keep_their_vectors_by_component() -> None:
    items = [CorpusItem(f"m{i}", frozenset({"w"}), (float(i), 1.0, 0.0), "toy") for i in range(5)]
    base = build_corpus(items, model="toy", dim=3, by_component=True)
    grown, _ = patch_corpus(base, [CorpusItem("m9", frozenset(), (0, 0, 1.0), "toy")], [])
    moved, _ = patch_corpus(grown, [CorpusItem("m1", frozenset(), (0, 2.0, 0), "toy")], ["m2"])
    for each in (base, grown, moved):
        columns = each.vectors.T
        assert all(columns[j].flags.c_contiguous for j in range(3))
    assert cosines(moved, [0, 1, 0], "toy")[1] == 1.0
    assert cosines(grown, [0, 0, 1], "toy").tolist()[-1] == 1.0
