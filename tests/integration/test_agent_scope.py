"""Agent scope through the real store stage, on both backends (issue 37 item 1): one
user, two agents. A fact told to agent A about the user appears for agent B; a fact
specific to A does not; a fact told to both is one memory; a memory about the user that
confirms one of A's own makes it shared."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from memlane.config.settings import load_settings
from memlane.pipeline.errors import TranscriptError
from memlane.service.facade import Memlane
from tests.llm_stub import LLMStub, ok

LISBON = "User lives in Lisbon with two cats named Ada and Bob."
BULLETS = "User wants answers from this assistant in short bullet points."


def memory(content: str, about: str) -> dict[str, Any]:
    return {
        "content": content,
        "category": "fact",
        "importance": 0.8,
        "confidence": 1.0,
        "about": about,
    }


@pytest.fixture
def stub() -> Iterator[LLMStub]:
    with LLMStub() as stub:
        yield stub


@pytest.fixture
def agent_lane(db_url: str, stub: LLMStub) -> Iterator[Memlane]:
    settings = load_settings(
        database_url=db_url,
        llm_model="openai/stub-model",
        llm_api_base=stub.base_url,
        llm_api_key="x",
    )
    with Memlane(settings) as lane:
        yield lane


def tell(
    lane: Memlane,
    stub: LLMStub,
    conversation: str,
    agent: str | None,
    *memories: dict[str, Any],
    summary: str = "Talked about home.",
) -> None:
    """One conversation whose extraction (through litellm, the stub answering) finds
    `memories`, stored by the store stage before this returns."""
    stub.script([ok(list(memories), {"summary": summary, "topics": [], "outcome": None})])
    transcript: dict[str, Any] = {
        "conversation_id": conversation,
        "user_id": "u1",
        "messages": [
            {"role": "user", "content": "Some things about me."},
            {"role": "assistant", "content": "Noted."},
        ],
        "final": True,
    }
    if agent is not None:
        transcript["agent_id"] = agent
    lane.enqueue(transcript)
    lane.flush(timeout=120)  # the first call imports litellm: seconds on a busy box


def contents(lane: Memlane, agent: str | None, query: str = "where does the user live") -> str:
    return lane.assemble("u1", query, budget_tokens=2000, agent_id=agent).text


def test_one_user_two_agents(agent_lane: Memlane, stub: LLMStub) -> None:
    # given agent A told a fact about the user and one specific to A
    tell(
        agent_lane,
        stub,
        "c-a1",
        "agent-a",
        memory(LISBON, "user"),
        memory(BULLETS, "agent"),
        summary="Agent A learned how to answer.",
    )
    # when agent B is told the same fact about the user
    tell(agent_lane, stub, "c-b1", "agent-b", memory(LISBON, "user"), summary="B chat.")

    # then the fact about the user is one shared memory, confirmed by both
    stored = agent_lane.list_memories("u1", agent_id="agent-a")
    by_content = {m.content: m for m in stored}
    assert sorted(by_content) == sorted([LISBON, BULLETS])
    assert (by_content[LISBON].agent_id, by_content[LISBON].access_count) == (None, 2)
    assert by_content[BULLETS].agent_id == "agent-a"
    assert [m.content for m in agent_lane.list_memories("u1", agent_id="agent-b")] == [LISBON]
    assert [m.content for m in agent_lane.list_memories("u1")] == [LISBON]
    page = agent_lane.memories_page("u1", agent_id="agent-a")
    assert sorted(m.content for m in page.memories) == sorted([LISBON, BULLETS])

    # and B sees it, and not A's own memory nor A's episode
    for_b = contents(agent_lane, "agent-b")
    assert "Lisbon" in for_b
    assert "bullet points" not in for_b and "Agent A learned" not in for_b
    # A sees both, its own episode too, and the pack names each item's scope
    result = agent_lane.assemble("u1", "how to answer", budget_tokens=2000, agent_id="agent-a")
    assert "Lisbon" in result.text and "bullet points" in result.text
    assert "Agent A learned" in result.text
    scopes = {item.id: item.scope for item in result.pack.items if item.included}
    assert scopes[by_content[BULLETS].id] == "agent:agent-a"
    assert scopes[by_content[LISBON].id] == "user"
    assert result.pack.agent_id == "agent-a"
    # without an agent: the shared memories only
    shared = contents(agent_lane, None)
    assert "Lisbon" in shared and "bullet points" not in shared

    # search as B, as A, and as nobody
    # an export for B holds what B sees; without an agent, every agent's (and an import
    # keeps each memory's agent)
    def exported(agent: str | None) -> list[dict[str, Any]]:
        lines = agent_lane.export_user("u1", messages=True, agent_id=agent)
        return [json.loads(line) for line in lines]

    for_b_rows = exported("agent-b")
    assert BULLETS not in json.dumps(for_b_rows) and "Agent A learned" not in json.dumps(for_b_rows)
    assert {r["row"]["id"] for r in for_b_rows if r["kind"] == "conversations"} == {"c-b1"}
    every = [json.dumps(r) for r in exported(None)]
    agent_lane.import_user(every, user_id="u9")
    moved = {m.content: m.agent_id for m in agent_lane.list_memories("u9", agent_id="agent-a")}
    assert moved == {LISBON: None, BULLETS: "agent-a"}

    def found(agent: str | None) -> list[str]:
        return [h.memory.content for h in agent_lane.search("u1", "answers", agent_id=agent)]

    assert BULLETS in found("agent-a")
    assert BULLETS not in found("agent-b") and BULLETS not in found(None)

    # the store read (no working set) sees what the working set sees
    with Memlane(agent_lane.settings.model_copy(update={"working_set_mb": 0})) as store_read:
        for_b = contents(store_read, "agent-b")
        assert "Lisbon" in for_b and "bullet points" not in for_b
        assert "Agent A learned" not in for_b
        for_a = store_read.assemble("u1", "how to answer", budget_tokens=2000, agent_id="agent-a")
        assert "bullet points" in for_a.text and "Agent A learned" in for_a.text
        assert for_a.pack.retrieval_mode != "working-set"


def test_a_fact_about_the_user_confirming_an_agents_own_makes_it_shared(
    agent_lane: Memlane, stub: LLMStub
) -> None:
    tell(agent_lane, stub, "c-a1", "agent-a", memory(BULLETS, "agent"))
    assert "bullet points" not in contents(agent_lane, "agent-b", "answers bullet points")
    # A hears it again, now read as about the user
    tell(agent_lane, stub, "c-a2", "agent-a", memory(BULLETS, "user"))
    (only,) = agent_lane.list_memories("u1")
    assert (only.agent_id, only.access_count) == (None, 2)
    assert "bullet points" in contents(agent_lane, "agent-b", "answers bullet points")
    # its history says so
    edited = [e for e in agent_lane.memory_history("u1", only.id) if e.kind == "edited"]
    assert [e.detail["changes"] for e in edited] == [{"agent_id": ["agent-a", None]}]


def test_an_agents_own_fact_told_to_another_agent_is_that_agents_own(
    agent_lane: Memlane, stub: LLMStub
) -> None:
    tell(agent_lane, stub, "c-a1", "agent-a", memory(BULLETS, "agent"))
    tell(agent_lane, stub, "c-b1", "agent-b", memory(BULLETS, "agent"))
    # neither sees the other's: two memories, one each
    for agent in ("agent-a", "agent-b"):
        (own,) = agent_lane.list_memories("u1", agent_id=agent)
        assert (own.content, own.agent_id) == (BULLETS, agent)
    assert agent_lane.list_memories("u1") == []


def test_without_an_agent_every_memory_is_shared(agent_lane: Memlane, stub: LLMStub) -> None:
    tell(agent_lane, stub, "c1", None, memory(BULLETS, "agent"))
    (only,) = agent_lane.list_memories("u1")
    assert only.agent_id is None


def test_a_conversation_keeps_its_agent(agent_lane: Memlane, stub: LLMStub) -> None:
    tell(agent_lane, stub, "c-a1", "agent-a", memory(LISBON, "user"))
    with pytest.raises(TranscriptError, match="keeps the agent_id it was first sent with"):
        agent_lane.enqueue(
            {
                "conversation_id": "c-a1",
                "user_id": "u1",
                "agent_id": "agent-b",
                "messages": [{"role": "user", "content": "Hello again."}],
            }
        )


@pytest.mark.parametrize("working_set_mb", [64, 0])
def test_a_metadata_filter_applies_within_what_the_agent_sees(
    db_url: str, stub: LLMStub, working_set_mb: int
) -> None:
    # agent scope and metadata filters came from two branches: each narrows the other,
    # through the working set's row mask (64) and the store read's SQL (0)
    settings = load_settings(
        database_url=db_url,
        llm_model="openai/stub-model",
        llm_api_base=stub.base_url,
        llm_api_key="x",
        working_set_mb=working_set_mb,
    )
    told = [
        ("c-shared", "a", "eng", memory("User rides a red bicycle to work.", "user")),
        ("c-a-eng", "a", "eng", memory("User wants bicycle routes as numbered steps.", "agent")),
        ("c-a-ops", "a", "ops", memory("User wants bicycle news in one line.", "agent")),
        ("c-b-eng", "b", "eng", memory("User wants bicycle tips with a map link.", "agent")),
    ]
    with Memlane(settings) as lane:
        for conversation, agent, team, fact in told:
            stub.script([ok([fact], {"summary": "Bikes.", "topics": [], "outcome": None})])
            lane.enqueue(
                {
                    "conversation_id": conversation,
                    "user_id": "u1",
                    "agent_id": agent,
                    "metadata": {"team": team},
                    "messages": [{"role": "user", "content": "About my bicycle."}],
                    "final": True,
                }
            )
            lane.flush(timeout=120)
        for agent, wanted in [
            ("a", {"red bicycle", "numbered steps"}),
            ("b", {"red bicycle", "map link"}),
            (None, {"red bicycle"}),
        ]:
            text = lane.assemble(
                "u1", "bicycle", budget_tokens=2000, agent_id=agent, filter={"team": "eng"}
            ).text
            everything = {"red bicycle", "numbered steps", "one line", "map link"}
            assert {p for p in everything if p in text} == wanted, (agent, text)
