"""Invariants of the assembler for any store and any budget (hypothesis)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import timedelta

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from memlane.pipeline.assembly import context_format as fmt
from memlane.pipeline.assembly.assembler import assemble_context
from memlane.pipeline.assembly.filters import memory_exclusion
from memlane.pipeline.errors import BudgetError
from memlane.pipeline.ranking.scoring import STRATEGIES
from memlane.pipeline.records import SOUL_KINDS, MemoryRecord, SoulBlock
from tests.unit.assembly_helpers import NOW, episode, procedure, request, tokens

users = st.sampled_from(["u1", "u1", "u1", "u2"])
texts = st.text(min_size=1, max_size=80)
offsets = st.integers(min_value=-2_000, max_value=2_000).map(lambda h: timedelta(hours=h))


@st.composite
def memories(draw: st.DrawFn, index: int) -> MemoryRecord:
    expires = draw(st.one_of(st.none(), offsets.map(lambda d: NOW + d)))
    return MemoryRecord(
        id=f"m{index:03d}",
        user_id=draw(users),
        content=draw(texts),
        category=draw(st.sampled_from(["preference", "fact", "decision", "project"])),
        importance=draw(st.floats(min_value=0, max_value=1)),
        confidence=draw(st.sampled_from([0.7, 1.0])),
        tier=draw(st.sampled_from(["pinned", "verified", "candidate", "candidate"])),
        status=draw(st.sampled_from(["active", "active", "active", "quarantined", "deleted"])),
        sensitive=draw(st.booleans()),
        expires_at=expires,
        access_count=draw(st.integers(min_value=0, max_value=200)),
        created_at=NOW - abs(draw(offsets)),
        accessed_at=NOW - abs(draw(offsets)),
    )


@st.composite
def stores(draw: st.DrawFn) -> dict[str, object]:
    count = draw(st.integers(min_value=0, max_value=25))
    memory_list = [draw(memories(i)) for i in range(count)]
    kinds = draw(st.lists(st.sampled_from(SOUL_KINDS), max_size=3, unique=True))
    soul_blocks = [
        SoulBlock(user_id=draw(users), kind=kind, content=draw(texts), updated_at=NOW)
        for kind in kinds
    ]
    episodes = [
        episode(f"e{i}", draw(texts), age_days=draw(st.integers(0, 30)), user=draw(users))
        for i in range(draw(st.integers(min_value=0, max_value=5)))
    ]
    procedures = [
        procedure(f"pr{i}", draw(texts), {draw(st.sampled_from(["deploy", "billing"]))})
        for i in range(draw(st.integers(min_value=0, max_value=3)))
    ]
    return {
        "memories": memory_list,
        "soul_blocks": soul_blocks,
        "episodes": episodes,
        "procedures": procedures,
        "query": draw(st.sampled_from([None, "how to deploy", "billing question"])),
        "strategy": draw(st.sampled_from(STRATEGIES)),
        "relevance": {m.id: draw(st.floats(0, 1)) for m in memory_list[::2]},
        "memory_share": draw(st.floats(min_value=0, max_value=1)),
        "include_sensitive": draw(st.booleans()),
        "budget_tokens": draw(st.integers(min_value=1, max_value=1_500)),
    }


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(store=stores())
def test_invariants_for_any_store_and_budget(store: dict[str, object]) -> None:
    built = request(**store)
    eligible = {
        m.id: m for m in built.memories if m.user_id == "u1" and memory_exclusion(m, built) is None
    }
    pinned = sorted(
        (m for m in eligible.values() if m.tier == "pinned"),
        key=lambda m: (-m.created_at.timestamp(), m.id),
    )
    soul = sorted(
        (b for b in built.soul_blocks if b.user_id == "u1"), key=lambda b: SOUL_KINDS.index(b.kind)
    )
    must_have = fmt.render_xml(fmt.Selection(user_id="u1", soul=soul, memories=pinned))
    try:
        result = assemble_context(built)
    except BudgetError as error:
        # only when what must always be in cannot fit
        assert tokens(must_have) > built.budget_tokens
        assert error.required == tokens(must_have)
        event("budget error")
        return
    event(f"memories included: {min(len(result.included_memory_ids), 3)}+")
    event(f"events: {sorted({e.type for e in result.pack.events})}")

    # the count of the string exactly as returned, never over the budget
    assert result.pack.used_tokens == tokens(result.text) <= built.budget_tokens
    root = ET.fromstring(result.text)
    assert root.get("user") == "u1"
    # only the asking user's usable memories; all the pinned ones, first
    assert set(result.included_memory_ids) <= set(eligible)
    assert result.included_memory_ids[: len(pinned)] == [m.id for m in pinned]
    assert [e.get("id") for e in root.iter("m")] == result.included_memory_ids
    assert [s.get("kind") for s in root.iter("block")] == [b.kind for b in soul]
    pack_ids = {item.id for item in result.pack.items}
    foreign = {m.id for m in built.memories if m.user_id != "u1"}
    assert not pack_ids & foreign
    # the pack adds up
    assert result.pack.dropped_count == sum(not i.included for i in result.pack.items)
    assert sum(result.pack.drop_reasons.values()) == result.pack.dropped_count
    # same input, same bytes
    again = assemble_context(built)
    assert again.text == result.text
    assert again.pack.model_dump_json() == result.pack.model_dump_json()
