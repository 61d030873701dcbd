"""Replies to questions at the floor (assembly rule 4, issue 39) through the real store
stage and read, on both backends: a question taken brings in the line said next in its
conversation, though that line shares no word of the query, after every item at or above
the relevance floor and before the items below it; not when the line does not ask, nor
when the reply is filtered out (another agent's, a metadata filter, forgotten)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from memlane.config.settings import load_settings
from memlane.models.db import get_engine
from memlane.models.store.reads import replies
from memlane.service.facade import Memlane
from tests.llm_stub import LLMStub, ok

QUERY = "What did Caroline paint last week?"
QUESTION = "Melanie: What did you paint last week, Caroline?"
STATEMENT = "Melanie: You painted something last week, Caroline."
REPLY = "Sunset over the lake, with two ducks on it."
# below the floor, sharing a word or two of the query: ranked before the reply by relevance
BELOW = [
    "Melanie bought new brushes at the art store.",
    "Caroline went hiking with her family in the mountains.",
    "The gallery downtown opens a new exhibition next week.",
]


def memory(content: str, about: str = "user") -> dict[str, Any]:
    return {
        "content": content,
        "category": "fact",
        "importance": 0.5,
        "confidence": 1.0,
        "about": about,
    }


@pytest.fixture(params=[0.0, 64.0], ids=["store", "working-set"])
def reply_lane(request: pytest.FixtureRequest, db_url: str) -> Iterator[tuple[Memlane, LLMStub]]:
    with LLMStub() as stub:
        settings = load_settings(
            database_url=db_url,
            llm_model="openai/stub-model",
            llm_api_base=stub.base_url,
            llm_api_key="x",
            working_set_mb=request.param,
        )
        with Memlane(settings) as lane:
            yield lane, stub


def tell(
    lane: Memlane,
    stub: LLMStub,
    conversation: str,
    *memories: dict[str, Any],
    agent: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> None:
    """One conversation whose extraction finds `memories`, in this order (one
    extraction's memories share its time; their refs keep its order)."""
    stub.script([ok(list(memories), {"summary": "Chat.", "topics": [], "outcome": None})])
    transcript: dict[str, Any] = {
        "conversation_id": conversation,
        "user_id": "u1",
        "messages": [
            {"role": "user", "content": "Let us talk."},
            {"role": "assistant", "content": "Sure."},
        ],
        "final": True,
    }
    if agent is not None:
        transcript["agent_id"] = agent
    if metadata is not None:
        transcript["metadata"] = metadata
    lane.enqueue(transcript)
    lane.flush(timeout=120)


def walked(lane: Memlane, **kwargs: Any) -> list[dict[str, Any]]:
    pack = lane.assemble("u1", QUERY, budget_tokens=2000, **kwargs).pack_data
    return [i for i in pack["items"] if i["section"] == "memory" and i["components"]]


def content_ids(lane: Memlane, agent: str | None = None) -> dict[str, str]:
    return {m.content: m.id for m in lane.list_memories("u1", limit=100, agent_id=agent)}


def test_the_reply_to_a_question_comes_in_after_the_floor_before_the_rest(
    reply_lane: tuple[Memlane, LLMStub],
) -> None:
    lane, stub = reply_lane
    tell(lane, stub, "c1", memory(QUESTION), memory(REPLY), memory("Melanie: Lovely colours."))
    tell(lane, stub, "c2", *map(memory, BELOW))
    ids = content_ids(lane)
    items = walked(lane)
    order = [i["id"] for i in items]
    reply = next(i for i in items if i["id"] == ids[REPLY])
    assert reply["included"] and reply["reply_to"] == ids[QUESTION]
    floor = lane.settings.relevance_floor * max(i["components"]["relevance"] for i in items)
    at = order.index(reply["id"])
    assert all(i["components"]["relevance"] >= floor for i in items[:at])
    after = items[at + 1 :]
    assert after and all(i["components"]["relevance"] < floor for i in after)
    # the reply shares no word of the query: by relevance it would come after these
    assert any(i["components"]["relevance"] > reply["components"]["relevance"] for i in after)
    # the line said after the reply does not come (the reply does not ask)
    assert ids["Melanie: Lovely colours."] not in {i["id"] for i in items if i["reply_to"]}
    assembled = lane.assemble("u1", QUERY, budget_tokens=2000)
    from_view = lane.settings.working_set_mb > 0
    assert (assembled.pack_data["retrieval_mode"] == "working-set") == from_view
    context = assembled.text
    assert context.index("Sunset") < context.index("brushes")


def test_no_reply_when_the_line_does_not_ask(reply_lane: tuple[Memlane, LLMStub]) -> None:
    lane, stub = reply_lane
    tell(lane, stub, "c1", memory(STATEMENT), memory(REPLY))
    tell(lane, stub, "c2", *map(memory, BELOW))
    assert not any(i["reply_to"] for i in walked(lane))


def test_no_reply_when_it_is_forgotten(reply_lane: tuple[Memlane, LLMStub]) -> None:
    lane, stub = reply_lane
    tell(lane, stub, "c1", memory(QUESTION), memory(REPLY), memory("Melanie: Lovely colours."))
    tell(lane, stub, "c2", *map(memory, BELOW))
    ids = content_ids(lane)
    assert any(i["reply_to"] for i in walked(lane))
    lane.forget("u1", ids[REPLY])
    # no reply: the line after the forgotten one does not take its place
    assert not any(i["reply_to"] for i in walked(lane))


def test_no_reply_another_agent_does_not_see(reply_lane: tuple[Memlane, LLMStub]) -> None:
    lane, stub = reply_lane
    tell(lane, stub, "c1", memory(QUESTION), memory(REPLY, about="agent"), agent="painter")
    tell(lane, stub, "c2", *map(memory, BELOW))
    ids = content_ids(lane, "painter")
    assert not any(i["reply_to"] for i in walked(lane))
    mine = walked(lane, agent_id="painter")
    assert [i["id"] for i in mine if i["reply_to"]] == [ids[REPLY]]


def test_no_reply_a_metadata_filter_leaves_out(
    reply_lane: tuple[Memlane, LLMStub], db_url: str
) -> None:
    lane, stub = reply_lane
    tell(lane, stub, "c1", memory(QUESTION), memory(REPLY), metadata={"team": "art"})
    tell(lane, stub, "c2", *map(memory, BELOW), metadata={"team": "art"})
    ids = content_ids(lane)
    # the reply alone of another team, before any assembly reads the user (a write
    # outside memlane's doors is not in the change feed a working set follows)
    with get_engine(db_url).begin() as connection:
        connection.execute(
            sa.text("update memories set metadata = :m where id = :id"),
            {"m": '{"team": "ops"}', "id": ids[REPLY]},
        )
    assert not any(i["reply_to"] for i in walked(lane, filter={"team": "art"}))
    assert [i["id"] for i in walked(lane) if i["reply_to"]] == [ids[REPLY]]
    assert [i["id"] for i in walked(lane, filter={"team": "ops"}) if i["reply_to"]] == []


def test_said_next_reads_the_next_line_of_the_users_own_conversation(
    reply_lane: tuple[Memlane, LLMStub], db_url: str
) -> None:
    lane, stub = reply_lane
    tell(lane, stub, "c1", memory(QUESTION), memory(REPLY), memory("Melanie: Lovely colours?"))
    tell(lane, stub, "c2", *map(memory, BELOW))
    ids = content_ids(lane)
    asked = [ids[QUESTION], ids[REPLY], ids["Melanie: Lovely colours?"], ids[BELOW[-1]]]
    with Session(get_engine(db_url)) as session:
        found = replies.said_next(session, "u1", asked)
        # the last line of each conversation has none; another user reads none of u1's
        assert found == {ids[QUESTION]: ids[REPLY], ids[REPLY]: ids["Melanie: Lovely colours?"]}
        assert replies.said_next(session, "u2", asked) == {}
