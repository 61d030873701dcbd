"""Keywords, normalisation and polarity: the inputs of deduplication."""

from __future__ import annotations

import sys
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memlane.pipeline.dedup.keywords import (
    NLTK_ENGLISH_STOPWORDS,
    STOPWORDS,
    keywords,
    normalise,
    polarity,
    stem,
    tokens,
    topic_keywords,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("User prefers TypeScript", {"prefer", "typescript"}),
        ("User prefers functional patterns", {"prefer", "function", "pattern"}),
        ("The user is migrating to Postgres 16.", {"migrat", "postgr", "16"}),
        ("User's laptop runs Linux", {"laptop", "run", "linux"}),
        ("User builds a dashboard for users", {"build", "dashboard", "user"}),  # a topic
        ("Prefers C++ over node.js", {"prefer", "c", "node", "js"}),
        ("USER PREFERS TYPESCRIPT", {"prefer", "typescript"}),
        ("User doesn’t like Java anymore", {"like", "java"}),
        ("User no longer uses Java", {"use", "java"}),
        ("User prefers longer answers", {"prefer", "longer", "answer"}),
        ("Lives in Zürich since 2019", {"live", "zürich", "sinc", "2019"}),
        ("snake_case everywhere", {"snake", "case", "everywher"}),
        ("", set()),
        ("the and of it is", set()),
    ],
)
def test_keywords_are_stemmed_tokens_without_stopwords(text: str, expected: set[str]) -> None:
    assert keywords(text) == frozenset(expected)


def test_migrating_and_migration_share_a_stem() -> None:
    assert stem("migrating") == stem("migration") == stem("migrated") == "migrat"
    assert keywords("Migrating the database") == keywords("Database migration")


def test_negation_words_are_never_keywords() -> None:
    negations = "not no never nor cannot don't doesn't isn't won't can't dont doesnt anymore"
    assert keywords(negations) == frozenset()


def test_stopword_list_is_nltks_english_list_plus_negations_and_the_subject() -> None:
    assert len(NLTK_ENGLISH_STOPWORDS) == 198
    assert {"the", "not", "no", "don't", "you've", "ourselves"} <= NLTK_ENGLISH_STOPWORDS
    assert {"never", "cannot", "anymore", "dont"} <= STOPWORDS - NLTK_ENGLISH_STOPWORDS
    assert {"user", "user's"} <= STOPWORDS - NLTK_ENGLISH_STOPWORDS
    # Words that carry meaning in memories must survive.
    assert not {"users", "prefer", "like", "always", "java"} & STOPWORDS


def test_tokens_keep_contractions_and_unify_apostrophes() -> None:
    assert tokens("I don’t use C#") == ["i", "don't", "use", "c"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("User likes Java", 1),
        ("User prefers TypeScript", 1),
        ("User always writes tests", 1),
        ("User uses tabs", 1),
        ("User dislikes Java", -1),
        ("User hates meetings", -1),
        ("User hated the old UI", -1),
        ("User does not prefer TypeScript", -1),
        ("User doesn't like Java", -1),
        ("User doesn’t like Java", -1),
        ("User doesnt like Java", -1),
        ("User never writes tests", -1),
        ("User has no pets", -1),
        ("User no longer uses Vim", -1),
        ("User stopped using Vim", -1),
        ("User won't use Windows", -1),
        ("User can't stand PHP", -1),
        ("User cannot eat gluten", -1),
        ("User doesn't like Java anymore", -1),  # two markers, still negative
        ("Notion is the user's notes app", 1),  # "not" must be a whole word
        ("User knows Go", 1),
    ],
)
def test_polarity(text: str, expected: int) -> None:
    assert polarity(text) == expected


def test_topic_keywords_drop_polarity_stems_only() -> None:
    assert topic_keywords(keywords("User likes Java")) == {"java"}
    assert topic_keywords(keywords("User dislikes Java")) == {"java"}
    assert topic_keywords(keywords("User always writes tests")) == {"write", "test"}
    assert topic_keywords(keywords("User uses Java")) == {"use", "java"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("User prefers TypeScript.", "user prefers typescript"),
        ("  User   prefers\n\tTypeScript!!  ", "user prefers typescript"),
        ("User prefers TypeScript…", "user prefers typescript"),
        ("User prefers C++", "user prefers c++"),
        ("User prefers C", "user prefers c"),
        ("Uses Node.js.", "uses node.js"),
        ("User doesn’t like Java", "user doesn't like java"),
        ("ＵＳＥＲ", "user"),  # full-width letters fold (NFKC)
        ("Straße", "strasse"),  # casefold, not lower
    ],
)
def test_normalise(text: str, expected: str) -> None:
    assert normalise(text) == expected


def test_normalise_keeps_c_plus_plus_apart_from_c() -> None:
    assert normalise("User prefers C++.") != normalise("User prefers C.")


ascii_words = st.lists(
    st.sampled_from(["User", "prefers", "no", "longer", "Java", "don't", "the", "Tests", "x1"]),
    max_size=8,
).map(" ".join)


@given(ascii_words, ascii_words)
def test_keywords_are_case_blind_and_per_word(a: str, b: str) -> None:
    assert keywords(a) == keywords(a.upper()) == keywords(a.lower())
    if not (a.endswith("no") and b.startswith("longer")):  # "no longer" spans the join
        # per word within a language: a language is detected per text, not per word
        assert keywords(f"{a} {b}", "en") == keywords(a, "en") | keywords(b, "en")


@given(st.text())
def test_normalise_is_idempotent(text: str) -> None:
    once = normalise(text)
    assert normalise(once) == once


@given(st.text())
def test_polarity_is_minus_one_or_one(text: str) -> None:
    assert polarity(text) in (-1, 1)


def test_stemming_is_correct_under_threads() -> None:
    # A Snowball stemmer keeps its word in instance attributes: shared across threads
    # without the module's lock it returns wrong stems and raises IndexError.
    words = [
        f"{base}{end}"
        for base in ("migrat", "connect", "generaliz")
        for end in ("ing", "ion", "ations")
    ]
    expected = {word: stem(word) for word in words}
    failures: list[str] = []

    def work() -> None:
        try:
            for _ in range(100):
                for word in words:
                    stem.cache_clear()
                    if stem(word) != expected[word]:
                        failures.append(word)
        except Exception as error:  # an error in a thread would otherwise vanish
            failures.append(repr(error))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        threads = [threading.Thread(target=work) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert failures == []


def test_the_user_and_user_say_the_same_word_for_word() -> None:
    assert normalise("The user prefers TypeScript.") == normalise("User prefers TypeScript")
    assert normalise("The username is taken") != normalise("Username is taken")
