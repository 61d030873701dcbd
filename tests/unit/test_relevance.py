"""Relevance over a user's whole store: cosine of one embedder blended with BM25."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlane.pipeline.lexical import bm25_scores
from memlane.pipeline.relevance import CorpusItem, bm25, build_corpus, cosines, relevance

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
