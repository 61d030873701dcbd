"""Which found memories the dedup plan reads (pipeline/dedup/needs.py), case by case; the
property that the plan over them equals the plan over the whole store is in
tests/unit/test_prefix_filter.py."""

from __future__ import annotations

from memlane.pipeline.dedup.keywords import keywords
from memlane.pipeline.dedup.needs import Found, needed
from tests.defaults import DEDUP_MIN_KEYWORDS, DEDUP_THRESHOLD


def found(*memories: tuple[str, str, str]) -> list[Found]:
    return [Found(i, status, keywords(text), text) for i, status, text in memories]


def needed_for(text: str, stored: list[Found]) -> list[str]:
    return needed(
        [(text, keywords(text))], stored, threshold=DEDUP_THRESHOLD, min_keywords=DEDUP_MIN_KEYWORDS
    )


NEW = "User wants short answers with code first"  # want, short, answer, code, first


def test_a_short_statement_that_many_stored_ones_repeat_needs_only_its_best() -> None:
    # 300 longer statements all t-similar to the new one (5 of 6 keywords), in no id
    # order, and one equally good with a lower id: that one is the best.
    stored = found(
        *((f"m{i:04d}", "active", f"{NEW} on topic{i}") for i in range(300, 0, -1)),
    )
    assert needed_for(NEW, stored) == ["m0001"]


def test_the_best_match_of_the_wrong_polarity_is_passed_over() -> None:
    negated = "User never wants short answers with code first"
    stored = found(
        ("m1", "active", NEW),  # Jaccard 1, but the other polarity: no duplicate
        ("m2", "active", f"{negated} today"),  # Jaccard 5/6
    )
    assert needed_for(negated, stored) == ["m2"]
    assert needed_for(NEW, stored) == ["m1"]


def test_an_active_duplicate_comes_before_a_better_forgotten_one() -> None:
    stored = found(("m1", "deleted", NEW), ("m2", "active", f"{NEW} today"))
    assert needed_for(NEW, stored) == ["m2"]
    assert needed_for(NEW, stored[:1]) == ["m1"]  # none active: the forgotten one


def test_a_statement_that_duplicates_nothing_needs_every_memory_it_contradicts() -> None:
    stored = found(
        ("m1", "active", "User likes Java for backend services"),
        ("m2", "active", "User always likes Java for backend services at work"),
        ("m3", "deleted", "User likes Java for backend services a lot"),
        ("m4", "active", "User dislikes Java for backend services at work in team office"),
        ("m5", "active", "User likes Go for backend services"),  # another topic
    )
    assert needed_for("User dislikes Java for backend services", stored) == ["m1", "m2"]


def test_short_statements_match_only_word_for_word() -> None:
    stored = found(("m1", "active", "User likes tea."), ("m2", "active", "User likes tea daily"))
    assert needed_for("The user likes tea", stored) == ["m1"]
    assert needed_for("User likes coffee", stored) == []
