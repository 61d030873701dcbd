"""When two memory statements are duplicates, and when they conflict.

- jaccard(A, B) = |A ∩ B| / |A ∪ B| (0.0 for two empty sets).
- duplicate: the normalised texts are equal, or Jaccard(keywords) ≥ threshold with at
  least min_keywords keywords on each side and the same polarity. Fewer keywords than
  that merge only word for word: two short sets overlap too easily by chance.
- conflict: opposite polarity about the same topic, the topic being the keywords without
  the polarity stems (like, dislike, prefer, always, …). With min_keywords keywords on
  each side, the same topic is Jaccard(topics) ≥ threshold; below that, equal topics.
  "likes Java" / "dislikes Java", "prefers X" / "does not prefer X", "always" / "never".

Keywords of a language other than English carry its tag (pipeline.language.analyser), so
two statements in different languages share no keyword: neither rule holds across
languages, except equal texts.

Duplicates and conflicts exclude each other (same vs opposite polarity), except that
equal normalised texts are always duplicates.

`memlane.pipeline.dedup.plan.plan` turns these pairwise rules into what to store.
"""

from __future__ import annotations

from dataclasses import dataclass

from memlane.pipeline.dedup.keywords import (
    Polarity,
    language_of,
    normalise,
    polarity,
    topic_keywords,
)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a ∩ b| / |a ∪ b|; 0.0 when both are empty. Symmetric, in [0, 1]."""
    union = len(a | b)
    if union == 0:
        return 0.0
    return len(a & b) / union


@dataclass(frozen=True, slots=True)
class Statement:
    """A memory text with what the comparisons need, computed once."""

    normalised: str
    keywords: frozenset[str]
    topic: frozenset[str]
    polarity: Polarity

    @classmethod
    def of(cls, text: str, words: frozenset[str]) -> Statement:
        # the polarity in the keywords' language: the one they were made in (detected or
        # given), not a guess again from the text
        language = language_of(words) if words else None
        return cls(normalise(text), words, topic_keywords(words), polarity(text, language))


def statements_duplicate(
    a: Statement,
    b: Statement,
    *,
    threshold: float,
    min_keywords: int,
) -> bool:
    if a.normalised == b.normalised:
        return True
    return (
        a.polarity == b.polarity
        and len(a.keywords) >= min_keywords
        and len(b.keywords) >= min_keywords
        and jaccard(a.keywords, b.keywords) >= threshold
    )


def statements_conflict(
    a: Statement,
    b: Statement,
    *,
    threshold: float,
    min_keywords: int,
) -> bool:
    if a.polarity == b.polarity or not a.topic or not b.topic:
        return False
    if len(a.keywords) >= min_keywords and len(b.keywords) >= min_keywords:
        return jaccard(a.topic, b.topic) >= threshold
    return a.topic == b.topic


def is_duplicate(
    a_text: str,
    a_keywords: frozenset[str],
    b_text: str,
    b_keywords: frozenset[str],
    *,
    threshold: float,
    min_keywords: int,
) -> bool:
    """True when b says what a says (see the module docstring)."""
    return statements_duplicate(
        Statement.of(a_text, a_keywords),
        Statement.of(b_text, b_keywords),
        threshold=threshold,
        min_keywords=min_keywords,
    )


def conflicts(
    a_text: str,
    a_keywords: frozenset[str],
    b_text: str,
    b_keywords: frozenset[str],
    *,
    threshold: float,
    min_keywords: int,
) -> bool:
    """True when b says the opposite of a about the same topic (see the module
    docstring). Symmetric: which one supersedes the other is the caller's rule."""
    return statements_conflict(
        Statement.of(a_text, a_keywords),
        Statement.of(b_text, b_keywords),
        threshold=threshold,
        min_keywords=min_keywords,
    )
