"""Which of the memories a dedup lookup found the plan needs (memlane.pipeline.dedup.plan).

The lookup (memlane.pipeline.dedup.prefix_filter) finds every stored memory that could
duplicate or contradict a new statement. A short statement may be t-similar to hundreds
of longer stored ones (bench/README.md, dedup), and building each one's record to pick
one of them cost more than the rest of the lookup. By dedup's rules the plan reads, for
each new statement x:
- its best active duplicate: the first, by keyword Jaccard (highest first, ties by
  lowest id), that `statements_duplicate` accepts;
- when it has none, its best forgotten duplicate, found the same way (rule 0);
- when it has neither, x is inserted (a group's first member or a later one), and the
  polarity guard supersedes every active memory its group's first member contradicts
  (`statements_conflict`): so all of x's.

The plan over those memories equals the plan over all found, and so over the whole
store: a statement's best duplicate among them is its best among all (each memory ranked
above it is no duplicate of it); the conflicts the plan checks are of inserted
statements with active memories (here, all of them) or with confirmed ones (best
duplicates, here too); and `dedup.duplicate_of` (a fact added by hand, the fingerprints'
check) reads the same two best. tests/unit/test_prefix_filter.py checks it on random and
adversarial stores.

A found memory's text is read (its polarity, its normalised form) only when the
keywords leave it a chance: dedup compares the stored keywords, which are the keywords
of the text, so two texts equal once normalised have equal keyword sets, and any other
duplicate or conflict needs the Jaccard (of keywords, or of topics) at the threshold.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from functools import partial
from typing import NamedTuple

from memlane.pipeline.dedup.keywords import topic_keywords
from memlane.pipeline.dedup.similarity import (
    Statement,
    jaccard,
    statements_conflict,
    statements_duplicate,
)

_EPSILON = 1e-9  # as prefix_filter's: a bound that lets through what the rule decides


class Found(NamedTuple):
    """A memory the lookup found, as much of it as the choice reads."""

    id: str
    status: str  # "active" or "deleted" (forgotten)
    keywords: frozenset[str]  # as stored: never empty, the lookup found it by them
    content: str


def needed(
    new: Iterable[tuple[str, frozenset[str]]],
    found: Sequence[Found],
    *,
    threshold: float,
    min_keywords: int,
) -> list[str]:
    """The ids (sorted) of the found memories the plan of the new (text, keywords)
    statements reads, by the rules in the module docstring. A statement without keywords
    is left out: only its exact text repeats it, and such a text has no keywords either,
    so no lookup finds it."""
    made: dict[int, Statement] = {}
    duplicate = partial(statements_duplicate, threshold=threshold, min_keywords=min_keywords)
    conflict = partial(statements_conflict, threshold=threshold, min_keywords=min_keywords)

    def stored(i: int) -> Statement:
        statement = made.get(i)
        if statement is None:
            statement = Statement.of(found[i].content, found[i].keywords)
            made[i] = statement
        return statement

    active = [i for i, memory in enumerate(found) if memory.status == "active"]
    forgotten = [i for i, memory in enumerate(found) if memory.status == "deleted"]
    need: set[int] = set()
    for text, words in new:
        if not words:
            continue
        x = Statement.of(text, words)
        best = next(
            (
                i
                for pool in (active, forgotten)
                for i in _ranked(x, found, pool, threshold, min_keywords)
                if duplicate(x, stored(i))
            ),
            None,
        )
        if best is not None:
            need.add(best)
            continue
        need.update(
            i
            for i in active
            if _may_conflict(x, found[i].keywords, threshold, min_keywords)
            and conflict(x, stored(i))
        )
    return sorted(found[i].id for i in need)


def _ranked(
    x: Statement, found: Sequence[Found], pool: list[int], threshold: float, min_keywords: int
) -> Iterator[int]:
    """The pool's memories that may duplicate x, as `dedup` ranks them: highest keyword
    Jaccard first, ties by lowest id."""
    words, enough = x.keywords, len(x.keywords) >= min_keywords
    scored = []
    for i in pool:
        theirs = found[i].keywords
        similarity = jaccard(words, theirs)
        if theirs == words or (
            enough and len(theirs) >= min_keywords and similarity >= threshold - _EPSILON
        ):
            scored.append((-similarity, found[i].id, i))
    scored.sort()
    return (i for _, _, i in scored)


def _may_conflict(
    x: Statement, theirs: frozenset[str], threshold: float, min_keywords: int
) -> bool:
    """Whether the topics leave a conflict possible (`statements_conflict` without the
    polarity, which needs the text)."""
    topic = topic_keywords(theirs)
    if not x.topic or not topic:
        return False
    if len(x.keywords) >= min_keywords and len(theirs) >= min_keywords:
        return jaccard(x.topic, topic) >= threshold - _EPSILON
    return x.topic == topic
