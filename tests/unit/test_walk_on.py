"""pipeline.assembly.walk_on: rule 4's walk gone on with more items equals an assembly of all of
them, and it declines (None) where it would not."""

from __future__ import annotations

from dataclasses import replace

from memlane.pipeline.assembly.assembler import assemble_context
from memlane.pipeline.assembly.walk_on import walk_on
from tests.defaults import WEIGHTS
from tests.unit.assembly_helpers import episode, mem, request, soul

FIRST = [mem(f"m{i}", f"Fact {i} about tea and more tea.", importance=0.9) for i in range(4)]
LONG = mem("m_long", "Tea " * 80, importance=0.8)
LATER = [mem("m_later", "Tea.", importance=0.1), mem("m_gone", "Tea.", importance=0.1)]
EPISODE = episode("e9", "Talked about tea.", age_days=30)


def _ask(items, relevance, **changes):
    fields = {
        "query": "tea",
        "strategy": "scored",
        "weights": WEIGHTS,
        "budget_tokens": 260,
        "soul_blocks": [soul()],
        "memories": items,
        "relevance": relevance,
        "retrieval_mode": "working-set",
    }
    return request(**(fields | changes))


def _on(first, items, relevance, episodes=()):
    return walk_on(first, memories=items, episodes=episodes, procedures=(), relevance=relevance)


def test_going_on_equals_assembling_everything_anew() -> None:
    relevance = {m.id: 0.9 for m in [*FIRST, LONG]} | {"m_later": 0.5, "e9": 0.4}
    expired = LATER[1].model_copy(update={"expires_at": FIRST[0].created_at})  # in the pack
    first = assemble_context(_ask([*FIRST, LONG], relevance))
    assert first.room > 0
    more = _on(first, [LATER[0], expired], relevance, [EPISODE])
    every = assemble_context(
        replace(_ask([*FIRST, LONG, LATER[0], expired], relevance), episodes=[EPISODE])
    )
    assert more is not None
    assert "m_later" in more.included_memory_ids  # the premise: the walk took more
    assert (more.text, more.pack_data, more.room) == (every.text, every.pack_data, every.room)


def test_an_item_that_would_move_the_floor_or_come_first_is_not_walked_on() -> None:
    relevance = {m.id: 0.9 for m in FIRST}
    first = assemble_context(_ask(FIRST, relevance))
    # more relevant than the best walked: the relevance floor would move
    assert _on(first, [LATER[0]], {"m_later": 0.95}) is None
    # as relevant and more important: the walk would have taken it before the others
    assert _on(first, [mem("m_top", "Tea.", importance=1.0)], {"m_top": 0.9}) is None
    # a verified memory goes in before the pool (rule 3)
    assert _on(first, [mem("m_v", "Tea.", tier="verified")], {"m_v": 0.1}) is None


def test_rule_5_is_not_walked_on() -> None:
    first = assemble_context(_ask(FIRST, {}, query=None, strategy="important"))
    assert _on(first, [LATER[0]], {}) is None
