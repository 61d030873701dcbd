"""Agent scope at the doors (issue 37 item 1), the offline extractor deciding: "call me
…" is about the agent, "I live in …" about the user. The HTTP API (both backends), the
Python client sync and async (a real uvicorn process), the CLI and MCP each take an
agent, and read the user's shared memories plus that agent's; without one, the shared."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from memlane.api.app import create_app
from memlane.client import AsyncClient, Client
from memlane.mcp.server import build_server
from memlane.service.facade import Memlane
from tests.integration.conftest import _truncate as truncate
from tests.integration.test_cli import cli
from tests.integration.test_client import KEY, Server, serve

SAM = "User prefers to be called Sam."
PORTO = "User lives in Porto."


def transcript(user: str, conversation: str, agent: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "conversation_id": conversation,
        "user_id": user,
        "messages": [
            {"role": "user", "content": "Call me Sam. I live in Porto."},
            {"role": "assistant", "content": "Noted, Sam."},
        ],
        "final": True,
    }
    return body if agent is None else {**body, "agent_id": agent}


def test_the_http_api_takes_an_agent(lane: Memlane) -> None:
    with TestClient(create_app(lane)) as client:
        sent = client.post("/v1/transcripts", json=transcript("u1", "c1", "helper"))
        assert sent.status_code == 202, sent.text
        lane.flush(timeout=60)

        def listed(**params: str) -> list[str]:
            page = client.get("/v1/users/u1/memories", params=params)
            assert page.status_code == 200, page.text
            return sorted(m["content"] for m in page.json()["memories"])

        assert listed(agent_id="helper") == sorted([SAM, PORTO])
        assert listed(agent_id="other") == [PORTO] == listed()

        context = client.post(
            "/v1/context", json={"user_id": "u1", "query": "what is my name", "agent_id": "helper"}
        )
        assert context.status_code == 200, context.text
        assert "Sam" in context.json()["context"]
        pack = context.json()["pack"]
        assert pack["agent_id"] == "helper"
        assert {i["scope"] for i in pack["items"] if i["section"] == "memory"} == {
            "user",
            "agent:helper",
        }
        other = client.post(
            "/v1/context", json={"user_id": "u1", "query": "what is my name", "agent_id": "other"}
        )
        assert "Sam" not in other.json()["context"] and "Porto" in other.json()["context"]

        found = client.post("/v1/search", json={"user_id": "u1", "query": "called"})
        assert SAM not in [h["memory"]["content"] for h in found.json()]
        export = client.get("/v1/users/u1/export", params={"agent_id": "other"})
        assert export.status_code == 200 and "Sam" not in export.text and "Porto" in export.text

        # an agent id follows the user id's rule, at every door
        bad = client.post("/v1/transcripts", json=transcript("u1", "c2", "a/b"))
        assert bad.status_code == 422, bad.text
        assert "agent_id" in bad.text
        bad_context = client.post("/v1/context", json={"user_id": "u1", "agent_id": ""})
        assert bad_context.status_code == 422


@pytest.fixture(scope="module")
def server(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    truncate(pg_url)
    yield from serve(tmp_path_factory.mktemp("api"), MEMLANE_DATABASE_URL=pg_url)


def test_the_python_clients_take_an_agent(server: Server) -> None:
    with Client(server.url, api_key=KEY) as memlane:
        result = memlane.enqueue(transcript("client-agents", "ca-1", "helper"))
        assert set(memlane.wait(result.job_ids, timeout=60).values()) == {"done"}
        mine = memlane.list_memories("client-agents", agent_id="helper").memories
        assert sorted(m.content for m in mine) == sorted([SAM, PORTO])
        assert {m.content: m.agent_id for m in mine}[SAM] == "helper"
        shared = [m.content for m in memlane.iter_memories("client-agents")]
        assert shared == [PORTO]
        context = memlane.context("client-agents", "my name", agent_id="helper")
        assert "Sam" in context.context
        hits = memlane.search("client-agents", "called", agent_id="helper")
        assert SAM in [h.memory.content for h in hits]
        assert "Sam" not in memlane.export_user("client-agents", agent_id="other")

    async def run() -> tuple[list[str], str]:
        async with AsyncClient(server.url, api_key=KEY) as memlane:
            page = await memlane.list_memories("client-agents", agent_id="other")
            exported = await memlane.export_user("client-agents", agent_id="helper")
            return [m.content for m in page.memories], exported

    listed, exported = asyncio.run(run())
    assert listed == [PORTO] and "Sam" in exported


def test_the_cli_takes_an_agent(db_url: str, tmp_path: Path) -> None:
    file = tmp_path / "t.json"
    file.write_text(json.dumps(transcript("u1", "c1", None)))
    done = cli(db_url, "enqueue", str(file), "--agent", "helper", "--json")
    assert done.exit_code == 0, done.output

    def listed(*agent: str) -> list[str]:
        shown = cli(db_url, "memories", "list", "--user", "u1", "--json", *agent)
        assert shown.exit_code == 0, shown.output
        return sorted(m["content"] for m in json.loads(shown.output))

    assert listed("--agent", "helper") == sorted([SAM, PORTO])
    assert listed() == [PORTO]
    built = cli(db_url, "assemble", "--user", "u1", "-q", "my name", "--agent", "helper")
    assert built.exit_code == 0 and "Sam" in built.output
    searched = cli(db_url, "search", "--user", "u1", "-q", "called", "--json", "--agent", "x")
    assert searched.exit_code == 0 and "Sam" not in searched.output
    exported = cli(db_url, "users", "export", "--user", "u1", "--agent", "helper")
    assert exported.exit_code == 0 and "Sam" in exported.output
    refused = cli(db_url, "enqueue", str(file), "--agent", "a/b")
    assert refused.exit_code == 2, refused.output


def test_an_mcp_server_is_one_agent(lane: Memlane) -> None:
    server = build_server(lane, "u1", agent_id="helper")
    handed = asyncio.run(
        server.call_tool("remember", {"messages": transcript("u1", "c1", None)["messages"]})
    )
    assert not handed.is_error, handed.content
    lane.flush(timeout=60)
    (stored,) = [m for m in lane.list_memories("u1", agent_id="helper") if m.content == SAM]
    assert stored.agent_id == "helper"
    recalled = asyncio.run(server.call_tool("recall", {"query": "my name"}))
    assert "Sam" in str(recalled.structured_content)
    other = asyncio.run(
        build_server(lane, "u1", agent_id="other").call_tool("recall", {"query": "my name"})
    )
    assert "Sam" not in str(other.structured_content)
