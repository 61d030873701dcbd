"""`memlane mcp` driven by the official MCP SDK's own client: over stdio (the command
started as a subprocess, as a desktop client starts it) on both backends, every tool
called and its effect read from the store; over streamable HTTP, the bind address and
the bearer key rule."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import TextResourceContents
from typer.testing import CliRunner

from memlane.cli.app import app
from memlane.config.settings import load_settings
from memlane.service.facade import Memlane
from tests.integration.test_chat_formats import OPENAI_FILE, assert_memories_are_what_the_user_said
from tests.integration.test_client import free_port

TOOLS = {"remember", "recall", "search", "list_memories", "pin", "forget"}
FACT = "Maya keeps bees on the roof of her flat."
KEY = "mcp-test-key-81f2"


def server_env(**env: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
    return {**clean, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **env}


def stdio(db_url: str, cwd: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "memlane", "mcp", "--user", "maya"],
        env=server_env(MEMLANE_DATABASE_URL=db_url),
        cwd=cwd,
    )


def data(result: Any) -> Any:
    """A tool's structured answer (a bare value comes wrapped as {"result": …})."""
    assert not result.is_error, result.content
    content = result.structured_content
    return content["result"] if set(content) == {"result"} else content


def test_every_tool_over_stdio_acts_on_the_servers_user_only(db_url: str, tmp_path: Path) -> None:
    messages = json.loads(OPENAI_FILE.read_text())["messages"]

    async def session() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with Client(stdio(db_url, tmp_path)) as client:
            tools = (await client.list_tools()).tools
            seen["tools"] = {t.name: t.input_schema for t in tools}
            call = client.call_tool
            seen["stored"] = data(await call("remember", {"fact": FACT, "category": "project"}))
            seen["known"] = data(await call("remember", {"fact": FACT}))
            seen["both"] = await call("remember", {"fact": FACT, "messages": messages})
            seen["enqueued"] = data(await call("remember", {"messages": messages}))
            with Memlane(load_settings(database_url=db_url)) as lane:  # the store, read apart
                jobs = seen["enqueued"]["job_ids"]
                seen["jobs"] = lane.wait(jobs, timeout=60)
            seen["recall"] = data(await call("recall", {"query": "Where does the user live?"}))
            seen["search"] = data(await call("search", {"query": "bees roof", "limit": 3}))
            bee = seen["stored"]["memory"]
            seen["pin"] = data(await call("pin", {"memory_id": str(bee["ref"])}))
            page = data(await call("list_memories", {"limit": 2}))
            rest = data(await call("list_memories", {"cursor": page["next_cursor"]}))
            seen["listed"] = page["memories"] + rest["memories"]
            resources = (await client.list_resources()).resources
            seen["resources"] = [str(r.uri) for r in resources]
            seen["templates"] = (await client.list_resource_templates()).resource_templates
            [read] = (await client.read_resource(resources[0].uri)).contents
            assert isinstance(read, TextResourceContents) and read.mime_type == "application/json"
            seen["resource"] = json.loads(read.text)
            seen["forget"] = data(await call("forget", {"memory_id": bee["id"]}))
            seen["again"] = await call("remember", {"fact": FACT})
            seen["missing"] = await call("pin", {"memory_id": "mem_nope"})
        return seen

    seen = asyncio.run(session())
    assert set(seen["tools"]) == TOOLS
    assert not any("user" in name for s in seen["tools"].values() for name in s["properties"])
    assert seen["stored"]["outcome"] == "stored" and seen["known"]["outcome"] == "known"
    assert seen["known"]["memory"]["id"] == seen["stored"]["memory"]["id"]
    # confirmed, as add_memory confirms a duplicate (one rule for hand-added facts)
    stored_count = seen["stored"]["memory"]["access_count"]
    assert seen["known"]["memory"]["access_count"] == stored_count + 1
    assert seen["both"].is_error and "either" in seen["both"].content[0].text
    assert seen["enqueued"]["outcome"] == "enqueued" and set(seen["jobs"].values()) == {"done"}
    assert "Porto" in seen["recall"] and seen["recall"].startswith("<memlane_context")
    assert seen["search"][0]["memory"]["content"] == FACT
    assert seen["pin"]["tier"] == "pinned"
    assert seen["resources"] == ["memlane://users/maya/memories"] and seen["templates"] == []
    listed = [m["content"] for m in seen["listed"]]
    assert [m["content"] for m in seen["resource"]] == listed and FACT in listed
    assert seen["forget"]["status"] == "deleted"
    assert seen["again"].is_error and "forgotten" in seen["again"].content[0].text
    assert seen["missing"].is_error and "no memory 'mem_nope'" in seen["missing"].content[0].text

    with Memlane(load_settings(database_url=db_url)) as lane:
        stored = lane.list_memories("maya", status=None)
    assert_memories_are_what_the_user_said([m.content for m in stored])
    [bee] = [m for m in stored if m.content == FACT]
    assert (bee.tier, bee.status, bee.category) == ("pinned", "deleted", "project")
    assert {m.user_id for m in stored} == {"maya"}


def test_the_user_must_be_named() -> None:
    result = CliRunner().invoke(app, ["mcp"])
    assert result.exit_code == 2 and "--user" in result.output


@pytest.fixture
def http_server(pg: str, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    port = free_port()
    log = tmp_path / "mcp-http.log"
    command = [sys.executable, "-m", "memlane", "mcp", "--transport", "http", "--port", str(port)]
    env = server_env(MEMLANE_DATABASE_URL=pg, MEMLANE_API_KEYS=KEY, MEMLANE_MCP_USER="maya")
    with log.open("w") as out:
        process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=out, stderr=out)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        for _ in range(400):
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                assert process.poll() is None, log.read_text()
                time.sleep(0.05)
        yield url, log
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_over_http_it_binds_loopback_and_wants_a_key(http_server: tuple[str, Path]) -> None:
    url, log = http_server
    assert f"Uvicorn running on {url.removesuffix('/mcp')}" in log.read_text()
    hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"accept": "application/json, text/event-stream"}
    for auth in ({}, {"authorization": "Bearer wrong"}, {"authorization": f"Basic {KEY}"}):
        answer = httpx.post(url, json=hello, headers=accept | auth)
        assert answer.status_code == 401, auth
        assert answer.json()["error"]["code"] == "unauthorized"
    # the key is not all: on loopback the SDK refuses another Host (DNS rebinding)
    rebound = {"authorization": f"Bearer {KEY}", "host": "memlane.example.com"}
    assert httpx.post(url, json=hello, headers=accept | rebound).status_code == 421

    async def session() -> tuple[set[str], Any]:
        headers = {"authorization": f"Bearer {KEY}"}
        http = httpx2.AsyncClient(headers=headers, timeout=30)
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            stored = data(await client.call_tool("remember", {"fact": FACT}))
        return names, stored

    names, stored = asyncio.run(session())
    assert names == TOOLS
    assert stored["outcome"] == "stored" and stored["memory"]["user_id"] == "maya"
