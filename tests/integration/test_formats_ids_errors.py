"""Issue 35, cases 10 to 14, through the doors on real PostgreSQL: OpenAI messages
without content, tool-looking text a user typed and Anthropic server tools (HTTP, the
facade, MCP); ids holding '/' reached over HTTP and by the client; MCP `remember` of the
same messages, again; and one error shape, naming the field and the reason, at every door."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from mcp.server.mcpserver.exceptions import ToolError
from sqlalchemy import select
from typer.testing import CliRunner

from memlane.api.app import create_app
from memlane.cli.app import app
from memlane.client import Client
from memlane.config.settings import load_settings
from memlane.mcp.server import build_server
from memlane.models.db import unit_of_work
from memlane.models.store.conversations import messages as conversations
from memlane.models.tables import Message
from memlane.pipeline.errors import TranscriptError
from memlane.service.facade import Memlane
from tests.integration.test_chat_formats import ANTHROPIC_FILE, OPENAI_FILE, payload
from tests.integration.test_client import KEY, Server, server  # noqa: F401  (a fixture)

USER = "maya"


@pytest.fixture
def lane(pg: str) -> Iterator[Memlane]:
    with Memlane(load_settings(database_url=pg)) as lane:
        yield lane


@pytest.fixture
def api(lane: Memlane) -> Iterator[TestClient]:
    with TestClient(create_app(lane)) as client:
        yield client


def transcript(conversation_id: str, *messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"conversation_id": conversation_id, "user_id": USER, "messages": list(messages)} | extra


def stored(url: str, conversation_id: str) -> list[tuple[str, str]]:
    """The conversation's stored messages, (role, content) in order."""
    with unit_of_work(url) as session:
        rows = session.execute(
            select(Message.role, Message.content)
            .where(Message.conversation_id == conversation_id)
            .order_by(Message.seq)
        )
        return [(role, content) for role, content in rows]


# --------------------------------------------------------------------------- case 10

ASK = {"role": "user", "content": "I live in Porto. Can you book me a flight?"}
NO_CONTENT = [
    {"role": "assistant", "content": None, "refusal": "I cannot book flights."},
    {"role": "assistant", "content": None, "audio": {"id": "audio_abc123"}},
    {"role": "assistant", "content": None, "refusal": "No.", "tool_calls": []},
    {"role": "assistant", "content": "Booked.", "tool_calls": []},
]


def test_openai_messages_without_content_are_read_at_every_door(
    api: TestClient, lane: Memlane, pg: str
) -> None:
    http = api.post("/v1/transcripts", json=transcript("c10-http", ASK, *NO_CONTENT))
    assert http.status_code == 202, http.text
    assert http.json()["stored_messages"] == 5
    assert http.json()["ignored_fields"] == {"field:audio": 1}
    facade = lane.enqueue(transcript("c10-facade", ASK, *NO_CONTENT))
    assert facade.stored_messages == 5
    with unit_of_work(pg) as session:
        # every one an assistant turn: the refusals, the audio reply and the text
        assert conversations.assistant_seqs(session, "c10-http") == [1, 2, 3, 4]
    replies = [content for _, content in stored(pg, "c10-http")[1:]]
    assert replies == ["I cannot book flights.", "[audio]", "No.", "Booked."]


def test_openai_messages_without_content_over_mcp(lane: Memlane) -> None:
    out = call(lane, "remember", {"messages": [ASK, *NO_CONTENT]})
    assert out["outcome"] == "enqueued" and out["stored_messages"] == 5


# --------------------------------------------------------------------------- case 13

LITERAL = '<tool_call name="a">I\'m allergic to shellfish</tool_call>'


def test_tool_looking_text_a_user_typed_is_remembered_over_http(
    api: TestClient, lane: Memlane
) -> None:
    body = transcript("c13", {"role": "user", "content": LITERAL}, final=True)
    response = api.post("/v1/transcripts", json=body)
    assert response.status_code == 202, response.text
    assert set(lane.wait(response.json()["job_ids"], timeout=60).values()) == {"done"}
    assert "User is allergic to shellfish." in [m.content for m in lane.list_memories(USER)]


SERVER_TOOLS = [
    {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
     "input": {"query": "Porto weather"}},
    {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1",
     "content": [{"type": "web_search_result", "url": "https://example.org/porto",
                  "title": "Porto weather", "encrypted_content": "Zm9v"}]},
]  # fmt: skip


def test_server_tool_parts_are_tool_activity_and_do_not_count(lane: Memlane, pg: str) -> None:
    body = transcript(
        "c13-server",
        {"role": "user", "content": "What's the weather in Porto?"},
        {"role": "assistant", "content": SERVER_TOOLS},
        {"role": "assistant", "content": [{"type": "text", "text": "Sunny."}, *SERVER_TOOLS]},
        format="anthropic",
    )
    assert lane.enqueue(body).stored_messages == 3
    with unit_of_work(pg) as session:
        assert conversations.assistant_seqs(session, "c13-server") == [2]
    assert [role for role, _ in stored(pg, "c13-server")] == ["user", "tool", "assistant"]


# --------------------------------------------------------------------------- case 11

SLASHED = "team/chat/1"


def test_ids_with_a_slash_are_reachable_over_http(api: TestClient, lane: Memlane) -> None:
    lane.enqueue(transcript(SLASHED, {"role": "user", "content": "I live in Porto."}))
    gone = api.delete(f"/v1/users/{USER}/conversations/team%2Fchat%2F1")
    assert gone.status_code == 200, gone.text
    assert gone.json()["conversation_id"] == SLASHED and gone.json()["deleted"]["messages"] == 1
    added = api.post(f"/v1/users/{USER}/procedures", json={"name": "deploy/prod", "content": "x"})
    assert added.status_code == 201, added.text
    removed = api.delete(f"/v1/users/{USER}/procedures/deploy%2Fprod")
    assert removed.status_code == 204, removed.text
    assert api.get(f"/v1/users/{USER}/procedures").json() == []
    # an id that was never stored is still the API's 404, not the router's
    missing = api.delete(f"/v1/users/{USER}/conversations/no%2Fsuch")
    assert missing.status_code == 404 and "no%2Fsuch" not in missing.text


def test_ids_with_a_slash_are_reachable_by_the_client(server: Server) -> None:  # noqa: F811
    with Client(server.url, api_key=KEY) as memlane:
        memlane.enqueue(transcript("a/b/c", {"role": "user", "content": "I live in Porto."}))
        assert memlane.delete_conversation(USER, "a/b/c").conversation_id == "a/b/c"
        memlane.add_procedure(USER, "ops/rollback", "Roll back with care.")
        memlane.delete_procedure(USER, "ops/rollback")
        assert memlane.procedures(USER) == []


# --------------------------------------------------------------------------- case 12


def call(lane: Memlane, tool: str, arguments: dict[str, Any]) -> Any:
    """A tool called as the SDK calls it (its argument validation included)."""
    result = asyncio.run(build_server(lane, USER).call_tool(tool, arguments))
    assert not result.is_error, result.content
    content = result.structured_content
    return content["result"] if set(content) == {"result"} else content


def test_mcp_remember_of_the_same_messages_is_idempotent(lane: Memlane, pg: str) -> None:
    messages = json.loads(OPENAI_FILE.read_text())["messages"]
    first = call(lane, "remember", {"messages": messages})
    assert set(lane.wait(first["job_ids"], timeout=60).values()) == {"done"}
    before = {m.id: (m.tier, m.confirmed_at) for m in lane.list_memories(USER)}
    assert before
    for _ in range(3):
        again = call(lane, "remember", {"messages": messages})
        assert again["conversation_id"] == first["conversation_id"]
        assert again["stored_messages"] == 0
        lane.wait(again["job_ids"], timeout=60)
    after = {m.id: (m.tier, m.confirmed_at) for m in lane.list_memories(USER)}
    assert after == before  # nothing confirmed to verified by a re-read
    other = call(lane, "remember", {"messages": messages[:2]})
    assert other["conversation_id"] != first["conversation_id"]
    named = call(lane, "remember", {"messages": messages, "conversation_id": "mine"})
    assert named["conversation_id"] == "mine"


# --------------------------------------------------------------------------- case 14


def test_http_names_where_the_json_is_broken(api: TestClient) -> None:
    body = '{"conversation_id": "c",\n "user_id": "maya",\n "messages": [oops]}'
    response = api.post(
        "/v1/transcripts", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422
    message = response.json()["error"]["message"]
    assert message == "invalid transcript: invalid JSON at line 3 column 15: Expecting value"
    other = api.post(
        f"/v1/users/{USER}/memories", content="{", headers={"content-type": "application/json"}
    )
    assert other.json()["error"]["message"].startswith("invalid request: invalid JSON at line 1")


def test_a_mixed_transcript_reads_the_same_over_http_the_facade_and_the_cli(
    api: TestClient, lane: Memlane, pg: str, tmp_path: Path
) -> None:
    openai, anthropic = payload(OPENAI_FILE), payload(ANTHROPIC_FILE)
    messages = [*openai["messages"][:3], anthropic["messages"][1]]
    body = {**openai, "format": "auto", "messages": messages}
    over_http = api.post("/v1/transcripts", json=body).json()["error"]["message"]
    with pytest.raises(TranscriptError) as caught:
        lane.enqueue(body)
    assert over_http == str(caught.value)
    file = tmp_path / "mixed.json"
    file.write_text(json.dumps(body))
    done = CliRunner().invoke(app, ["enqueue", str(file)], env={"MEMLANE_DATABASE_URL": pg})
    assert done.exit_code != 0 and f"{file}: {over_http}" in done.stderr
    assert over_http.startswith("invalid transcript: messages.0 has an OpenAI shape and messages.3")


def test_mcp_refuses_a_small_budget_in_words(lane: Memlane) -> None:
    with pytest.raises(ToolError) as caught:
        asyncio.run(
            build_server(lane, USER).call_tool("recall", {"query": "x", "budget_tokens": 5})
        )
    message = str(caught.value)
    assert message == (
        "invalid arguments for recall: budget_tokens: Input should be greater than or equal to 50"
    )
    assert "validation error" not in message and "pydantic" not in message


def test_memories_edit_says_nan_is_not_a_number(lane: Memlane, pg: str) -> None:
    stored, _ = lane.add_or_confirm(USER, {"content": "User lives in Porto."})
    done = CliRunner().invoke(
        app,
        ["memories", "edit", "--user", USER, stored.id, "--importance", "nan"],
        env={"MEMLANE_DATABASE_URL": pg},
    )
    assert done.exit_code != 0
    assert "importance: must be a number" in done.stderr and "less than" not in done.stderr
    over_http = TestClient(create_app(lane)).patch(
        f"/v1/users/{USER}/memories/{stored.id}", content='{"importance": NaN}',
        headers={"content-type": "application/json"},
    )  # fmt: skip
    assert over_http.status_code == 422
    assert "importance: must be a number" in over_http.json()["error"]["message"]
