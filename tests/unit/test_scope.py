"""Agent scope (memlane.pipeline.scope): what a read for an agent sees, whom a learned
memory belongs to, and deduplication within what one assembly sees together."""

from __future__ import annotations

from memlane.pipeline.assembly.assembler import assemble_context
from memlane.pipeline.dedup import plan as dedup
from memlane.pipeline.extraction.extract import parse_extraction
from memlane.pipeline.extraction.offline.extractor import find_memories
from memlane.pipeline.extraction.prompts import extraction_json_schema
from memlane.pipeline.records import ExtractedMemory, StoredMessage
from memlane.pipeline.scope import (
    insert_scope,
    memory_scope,
    promoted,
    scope_label,
    sees,
    visible,
)
from tests.defaults import CATEGORIES, DEDUP_MIN_KEYWORDS, DEDUP_THRESHOLD
from tests.unit.assembly_helpers import NOW, episode, mem, request

LISBON = "User lives in Lisbon with two cats named Ada and Bob."


def extracted(content: str = LISBON, about: str = "user") -> ExtractedMemory:
    return ExtractedMemory.model_validate(
        {"content": content, "category": "fact", "importance": 0.7, "confidence": 1.0,
         "about": about}
    )  # fmt: skip


def test_a_reader_sees_the_shared_items_and_its_own() -> None:
    assert sees("a", None) and sees("a", "a") and not sees("a", "b")
    assert sees(None, None) and not sees(None, "a")  # no agent: the shared items only
    records = [mem("m1"), mem("m2", agent_id="a"), mem("m3", agent_id="b")]
    assert [r.id for r in visible(records, "a")] == ["m1", "m2"]
    assert [r.id for r in visible(records, None)] == ["m1"]
    assert (scope_label(None), scope_label("a")) == ("user", "agent:a")


def test_a_memory_is_the_agents_only_when_the_conversation_has_one() -> None:
    assert memory_scope(extracted(about="agent"), "a") == "a"
    assert memory_scope(extracted(about="user"), "a") is None
    assert memory_scope(extracted(about="agent"), None) is None  # no agent: shared
    assert extracted().about == "user"  # the contract's default


def test_one_insert_of_sightings_of_both_scopes_is_shared() -> None:
    assert insert_scope(["a", None, "a"], [0, 2]) == "a"
    assert insert_scope(["a", None, "a"], [0, 1]) is None


def test_dedup_within_what_the_agent_sees() -> None:
    # given the same fact stored for agent B alone and nothing shared
    known = [mem("m-b", LISBON, agent_id="b")]
    sighting = dedup.Sighting.of(extracted(), conversation_id="c-a", new_from_seq=0, end_seq=1)

    def planned(reader: str | None) -> dedup.DedupPlan:
        return dedup.plan(
            [sighting],
            visible(known, reader),
            now=NOW,
            threshold=DEDUP_THRESHOLD,
            min_keywords=DEDUP_MIN_KEYWORDS,
        )

    # A does not see B's: a new memory, not a bump of B's
    for_a = planned("a")
    assert (len(for_a.inserts), for_a.bumps) == (1, ())
    # B sees its own: a confirmation
    assert [b.memory_id for b in planned("b").bumps] == ["m-b"]


def test_a_memory_about_the_user_confirming_an_agents_own_promotes_it() -> None:
    known = {"m-a": mem("m-a", LISBON, agent_id="a"), "m-s": mem("m-s", "Shared.")}
    confirmations = [("m-a", [0]), ("m-s", [1])]
    assert promoted(confirmations, known, [None, None]) == ["m-a"]
    # an agent's own memory confirming never widens or narrows anything
    assert promoted(confirmations, known, ["a", "a"]) == []


def test_an_assembly_for_an_agent_sees_the_shared_items_and_its_own() -> None:
    memories = [
        mem("m1", "User lives in Lisbon."),
        mem("m2", "User wants bullet points.", agent_id="a"),
        mem("m3", "User wants long prose.", agent_id="b"),
    ]
    episodes = [
        episode("e1", "Shared talk."),
        episode("e2", "A's talk.").model_copy(update={"agent_id": "a"}),
        episode("e3", "B's talk.").model_copy(update={"agent_id": "b"}),
    ]
    for_a = assemble_context(request(memories=memories, episodes=episodes, agent_id="a"))
    assert "bullet points" in for_a.text and "A's talk" in for_a.text
    assert "long prose" not in for_a.text and "B's talk" not in for_a.text
    items = {i["id"]: i["scope"] for i in for_a.pack_data["items"]}
    assert items == {"m1": "user", "m2": "agent:a", "e1": "user", "e2": "agent:a"}
    assert for_a.pack.agent_id == "a"
    shared = assemble_context(request(memories=memories, episodes=episodes))
    assert {i["id"] for i in shared.pack_data["items"]} == {"m1", "e1"}
    # the agent is part of what identifies the call: another pack id
    assert (
        shared.pack_id
        != assemble_context(
            request(memories=memories[:1], episodes=episodes[:1], agent_id="a")
        ).pack_id
    )


def test_the_offline_extractor_reads_what_is_asked_of_the_assistant_as_the_agents() -> None:
    said = "Call me Sam. You should never use emojis. Answer me in French. I live in Lisbon."
    message = StoredMessage(conversation_id="c", seq=0, role="user", content=said, created_at=NOW)
    assert [(m.content, m.about) for m in find_memories([message])] == [
        ("User prefers to be called Sam.", "agent"),
        ("User wants the assistant to never use emojis.", "agent"),
        ("User wants answers in French.", "agent"),
        ("User lives in Lisbon.", "user"),
    ]


def test_the_extraction_contract_states_the_scope() -> None:
    schema = extraction_json_schema(CATEGORIES)["properties"]["memories"]["items"]
    assert schema["properties"]["about"] == {"type": "string", "enum": ["user", "agent"]}
    assert "about" in schema["required"]
    answer = (
        '{"memories": ['
        '{"content": "User wants short answers.", "category": "preference",'
        ' "importance": 0.7, "confidence": 1.0, "about": "agent"},'
        '{"content": "User lives in Lisbon.", "category": "fact",'
        ' "importance": 0.7, "confidence": 1.0, "about": "nonsense"},'
        '{"content": "User has two cats.", "category": "fact",'
        ' "importance": 0.7, "confidence": 1.0}],'
        ' "episode": {"summary": "Chat.", "topics": [], "outcome": null}}'
    )
    parsed = parse_extraction(answer, max_memories=10, categories=CATEGORIES)
    # an unknown or missing scope reads as the safe default: about the user
    assert [m.about for m in parsed.extraction.memories] == ["agent", "user", "user"]
