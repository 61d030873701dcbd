from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memlane.pipeline.dedup.keywords import keywords
from memlane.pipeline.ranking.tiers import earns_verified, promotions
from memlane.pipeline.records import MemoryRecord

T = datetime(2026, 1, 1, tzinfo=UTC)


def record(memory_id: str, *, tier: str = "candidate", access_count: int = 2) -> MemoryRecord:
    return MemoryRecord(
        id=memory_id,
        user_id="u",
        content="User is allergic to peanuts.",
        category="fact",
        importance=0.8,
        confidence=1.0,
        tier=tier,
        access_count=access_count,
        created_at=T,
        accessed_at=T,
    )


@pytest.mark.parametrize(
    ("tier", "count", "confidence", "importance", "expected"),
    [
        ("candidate", 3, 1.0, 0.8, True),
        ("candidate", 2, 1.0, 0.8, False),  # not yet confirmed three times
        ("candidate", 3, 0.7, 0.8, False),  # an inference never verifies itself
        ("candidate", 3, 0.9, 0.5, True),  # both limits are inclusive
        ("candidate", 3, 1.0, 0.49, False),  # minor facts stay candidates
        ("pinned", 9, 1.0, 1.0, False),  # never demoted to verified
        ("verified", 9, 1.0, 1.0, False),  # already there
    ],
)
def test_the_verification_rule(tier, count, confidence, importance, expected) -> None:
    assert (
        earns_verified(
            tier=tier,
            access_count=count,
            confidence=confidence,
            importance=importance,
            memory_keywords=keywords("User is allergic to peanuts."),
        )
        is expected
    )


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("Take care, bye!", False),
        ("Thanks, see you later!", False),
        ("Hey, great to hear from you!", False),
        ("Wow, that sounds amazing, congrats!", False),
        ("User is allergic to peanuts.", True),
        ("User loves hiking on weekends.", True),
        ("Thanks for the Vitest tip, switching the tests.", True),
    ],
)
def test_a_pleasantry_is_never_verified_by_repetition(content: str, expected: bool) -> None:
    # confirmed nine times, said by the user, important: what it says decides
    assert (
        earns_verified(
            tier="candidate",
            access_count=9,
            confidence=1.0,
            importance=0.8,
            memory_keywords=keywords(content),
        )
        is expected
    )


def test_promotions_read_what_a_memory_says() -> None:
    stock = record("s", access_count=2).model_copy(
        update={"content": "Thanks, see you later!", "keywords": keywords("Thanks, see you later!")}
    )
    fact = record("f", access_count=2)  # no keywords kept: read from its content
    assert promotions([("s", 1, 0.8, 1.0), ("f", 1, 0.8, 1.0)], {"s": stock, "f": fact}) == ["f"]


def test_promotions_count_the_bump_increment() -> None:
    known = {
        "a": record("a", access_count=2),
        "b": record("b", access_count=1),
        "c": record("c", tier="pinned", access_count=5),
    }
    bumps = [("b", 1, 0.8, 1.0), ("a", 1, 0.8, 1.0), ("c", 1, 0.8, 1.0), ("gone", 5, 1, 1)]
    assert promotions(bumps, known) == ["a"]
