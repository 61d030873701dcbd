"""BM25, the max-normalisation and the hybrid relevance rule (pure functions)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memlane.pipeline.ranking.lexical import bm25_scores, normalise_by_max
from memlane.pipeline.ranking.scoring import blend_relevance, hybrid_relevance

DOCS = {"d1": ["a", "b"], "d2": ["b", "c"], "d3": ["c", "d", "e", "f"]}


def test_bm25_matches_a_hand_computed_value() -> None:
    # N = 3, df(a) = 1: idf = ln(1 + 2.5 / 1.5) = 0.98083; avgdl = 8/3, |d1| = 2:
    # norm = 1.2 · (0.25 + 0.75 · 2 / (8/3)) = 0.975; score = 0.98083 · 2.2 / 1.975
    assert bm25_scores(["a"], DOCS) == {"d1": pytest.approx(1.092569, abs=1e-6)}
    # df(b) = 2: idf = ln(1 + 1.5 / 2.5) = 0.47000; d1 and d2 have the same length
    assert bm25_scores(["b"], DOCS) == {
        "d1": pytest.approx(0.523548, abs=1e-6),
        "d2": pytest.approx(0.523548, abs=1e-6),
    }


def test_a_rare_term_outweighs_a_common_one() -> None:
    docs = {f"common{i}": ["tea", "user", "likes"] for i in range(8)}
    docs["rare"] = ["user", "visited", "reykjavik"]
    scores = bm25_scores(["tea", "reykjavik"], docs)
    assert max(scores, key=lambda k: scores[k]) == "rare"


def test_longer_documents_score_lower_for_the_same_match() -> None:
    docs = {"short": ["lisbon", "move"], "long": ["lisbon", "a", "b", "c", "d", "e", "f"]}
    scores = bm25_scores(["lisbon"], docs)
    assert scores["short"] > scores["long"] > 0


def test_repeats_count_in_documents_not_in_the_query() -> None:
    once = bm25_scores(["tea"], {"x": ["tea", "cup"], "y": ["coffee", "cup"]})
    twice = bm25_scores(["tea", "tea"], {"x": ["tea", "cup"], "y": ["coffee", "cup"]})
    assert once == twice
    more = bm25_scores(["tea"], {"x": ["tea", "tea"], "y": ["coffee", "cup"]})
    assert more["x"] > once["x"]


def test_nothing_to_match_gives_nothing() -> None:
    assert bm25_scores([], DOCS) == {}
    assert bm25_scores(["zzz"], DOCS) == {}
    assert bm25_scores(["a"], {}) == {}


def test_normalise_by_max_puts_the_best_at_one() -> None:
    assert normalise_by_max({"a": 0.4, "b": 0.1, "c": 0.0}) == {
        "a": 1.0,
        "b": pytest.approx(0.25),
    }
    assert normalise_by_max({"a": 0.0}) == {}
    assert normalise_by_max({}) == {}
    assert normalise_by_max({"a": math.nan}) == {}


def test_hybrid_relevance_is_the_documented_blend() -> None:
    assert hybrid_relevance(0.8, 0.5, 0.3) == pytest.approx(0.7 * 0.8 + 0.3 * 0.5)
    assert hybrid_relevance(0.0, 1.0, 0.3) == pytest.approx(0.3)
    assert hybrid_relevance(0.6, None, 0.3) == pytest.approx(0.6)  # no lexical signal
    assert hybrid_relevance(0.6, 0.0, 0.3) == pytest.approx(0.42)  # a signal of zero
    assert hybrid_relevance(0.6, 1.0, 0.0) == pytest.approx(0.6)
    assert hybrid_relevance(0.6, 1.0, 1.0) == pytest.approx(1.0)


def test_hybrid_relevance_clips_bad_inputs() -> None:
    assert hybrid_relevance(math.nan, 1.0, 0.3) == pytest.approx(0.3)
    assert hybrid_relevance(1.5, -2.0, 0.3) == pytest.approx(0.7)
    assert hybrid_relevance(0.5, 0.5, 7.0) == pytest.approx(0.5)


unit = st.floats(min_value=0.0, max_value=1.0)


@given(unit, unit, unit)
def test_hybrid_relevance_stays_between_its_inputs(cos: float, lex: float, w: float) -> None:
    blended = hybrid_relevance(cos, lex, w)
    assert min(cos, lex) - 1e-12 <= blended <= max(cos, lex) + 1e-12


@given(unit, unit, unit, unit)
def test_hybrid_relevance_is_monotone_in_the_lexical_score(
    cos: float, lex: float, other: float, w: float
) -> None:
    low, high = sorted((lex, other))
    assert hybrid_relevance(cos, low, w) <= hybrid_relevance(cos, high, w) + 1e-12


@given(
    st.dictionaries(
        st.sampled_from("abcdefgh"),
        st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=6),
        max_size=6,
    ),
    st.sets(st.sampled_from("abcdefgh"), max_size=4),
)
def test_bm25_scores_only_documents_sharing_a_term_and_never_negative(
    docs: dict[str, list[str]], query: set[str]
) -> None:
    scores = bm25_scores(query, docs)
    assert set(scores) == {d for d, words in docs.items() if query & set(words)}
    assert all(score > 0 for score in scores.values())


def test_blend_relevance_normalises_the_lexical_scores_of_the_set() -> None:
    cosine = {"a": 0.8, "b": 0.2}
    lexical = {"b": 4.0, "c": 2.0}  # raw BM25: b the best match (1.0), c half of it
    got = blend_relevance(["a", "b", "c"], cosine, lexical, 0.3)
    assert got == pytest.approx({"a": 0.7 * 0.8, "b": 0.7 * 0.2 + 0.3, "c": 0.3 * 0.5})


def test_without_a_lexical_match_relevance_is_the_cosine() -> None:
    # no lexical signal is not a signal of 0: the cosine keeps its whole share
    assert blend_relevance(["a", "b"], {"a": 0.8}, {}, 0.3) == {"a": 0.8}
    assert blend_relevance(["a"], {"a": 0.8}, {"a": 0.0}, 0.3) == {"a": 0.8}
