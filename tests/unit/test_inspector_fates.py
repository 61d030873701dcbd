"""The inspector's fates (memlane.service.inspector.fates): each pack item's drop reason
read as a fate, and the one sentence that says why it was or was not in the pack."""

from __future__ import annotations

from typing import Any

from memlane.service.inspector.fates import (
    BUDGET,
    FLOOR,
    INCLUDED,
    SHARE,
    candidate,
    floor_of,
    why,
)


def item(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "mem_1",
        "ref": 12,
        "section": "memory",
        "tier": "candidate",
        "components": {"relevance": 0.8, "composite": 0.55},
        "tokens": 25,
        "included": False,
        "drop_reason": "over_budget",
    }
    base.update(changes)
    return base


def test_the_floor_is_a_share_of_the_best_relevance() -> None:
    items = [item(components={"relevance": r}) for r in (0.2, 0.9, 0.4)]
    assert floor_of(items, 0.5) == 0.45
    assert floor_of([item(components={})], 0.5) is None  # no query, no floor


def test_an_included_item_says_what_it_cost() -> None:
    row = candidate(item(included=True, drop_reason=None, tier="pinned"), "vegetarian", 0.3)
    assert row.fate == INCLUDED and row.label == "m12"
    assert why(row, used=300, budget=400) == (
        "It was in the pack: memory m12 (pinned) took 25 tokens of 400."
    )


def test_a_budget_drop_above_the_floor_is_for_budget() -> None:
    row = candidate(item(), "x", 0.5)
    assert row.fate == BUDGET
    sentence = why(row, used=390, budget=400)
    assert sentence.startswith("It was dropped for budget")
    assert "composite 0.550" in sentence and "needed 25 tokens" in sentence
    assert "(390 of 400 tokens used)" in sentence


def test_a_budget_drop_below_the_floor_says_so() -> None:
    row = candidate(item(components={"relevance": 0.1, "composite": 0.3}), "x", 0.4)
    assert row.fate == FLOOR
    assert "its relevance 0.100 was below the floor" in why(row, used=10, budget=40)


def test_filtered_and_share_drops() -> None:
    for reason, words in (
        ("sensitive", "marked sensitive"),
        ("expired", "had expired"),
        ("quarantined", "is quarantined"),
        ("deleted", "was forgotten"),
        ("superseded", "superseded it"),
    ):
        row = candidate(item(drop_reason=reason), "x", None)
        assert row.fate == f"filtered: {reason}"
        assert words in why(row, used=0, budget=100)
        assert why(row, used=0, budget=100).startswith("It was left out before budgeting")
    share = candidate(item(drop_reason="over_memory_share"), "x", 0.9)  # not the floor's
    assert share.fate == SHARE
    assert "memories' share" in why(share, used=50, budget=100)


def test_items_other_than_memories_keep_their_ids() -> None:
    soul = candidate(item(id="soul:identity", section="soul", ref=None), "I am…", None)
    assert soul.label == "soul:identity"
    episode = candidate(item(id="ep_1", section="episode", ref=3), "met Sam", None)
    assert episode.label == "e3"
    purged = candidate(item(), None, None)
    assert purged.text is None and purged.fate == BUDGET
