"""Fingerprints of purged memories: the dedup rule over HMAC'd keywords and text, keyed
per user (another user's secret gives other hashes), with known memories first."""

from __future__ import annotations

from memlane.pipeline.dedup.fingerprints import (
    Fingerprint,
    fingerprint,
    matches,
    suppressed_indices,
)
from memlane.pipeline.dedup.keywords import keywords

A, B = b"a" * 32, b"b" * 32
RULE = {"threshold": 0.6, "min_keywords": 3}


def fp(secret: bytes, text: str) -> Fingerprint:
    return fingerprint(secret, text, keywords(text))


def test_the_same_fact_matches_under_the_same_secret_only() -> None:
    fact = "Prefers jasmine tea with honey every morning."
    assert matches(fp(A, fact), fp(A, fact), **RULE)
    assert not matches(fp(A, fact), fp(B, fact), **RULE)
    assert not set(fp(A, fact).keywords) & set(fp(B, fact).keywords)


def test_a_close_restatement_matches_by_jaccard_and_another_fact_does_not() -> None:
    stored = fp(A, "Prefers jasmine tea with honey every morning.")
    assert matches(fp(A, "Prefers jasmine tea with honey each morning."), stored, **RULE)
    assert not matches(fp(A, "Lives in Lisbon near the river."), stored, **RULE)
    # opposite polarity is no duplicate
    assert not matches(fp(A, "Never drinks jasmine tea with honey every morning."), stored, **RULE)


def test_short_facts_match_only_word_for_word() -> None:
    stored = fp(A, "Likes jazz.")
    assert matches(fp(A, "likes  jazz"), stored, **RULE)  # normalised text
    assert not matches(fp(A, "Likes jazz a lot."), stored, **RULE)


def test_nothing_is_suppressed_without_a_secret_or_fingerprints() -> None:
    fact = "Prefers jasmine tea with honey every morning."
    statements = [(fact, keywords(fact))]
    assert suppressed_indices(statements, [], None, [fp(A, fact)], **RULE) == []
    assert suppressed_indices(statements, [], A, [], **RULE) == []
    assert suppressed_indices(statements, [], A, [fp(A, fact)], **RULE) == [0]
