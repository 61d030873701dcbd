"""`memlane mcp --transport http` with stored keys and no server user: each tool acts on
the user it names, if the caller's key reaches them; a scoped key cannot reach another
tenant's user (not found, as over the HTTP API), a read key cannot write, and the
rate limit answers 429 before the SDK sees the request."""

from __future__ import annotations

import asyncio
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
from mcp.client.streamable_http import streamable_http_client

from memlane.service.keys.keyring import Keyring
from tests.integration.test_client import free_port
from tests.integration.test_mcp import server_env

FACT = "Maya keeps bees on the roof of her flat."


@pytest.fixture
def keyed_server(pg: str, tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    keyring = Keyring(pg)
    keys = {
        "acme": keyring.create("acme", users=["acme:*"]).key,
        "acme-reader": keyring.create("acme-reader", users=["acme:*"], scopes=["read"]).key,
        "globex": keyring.create("globex", users=["globex:*"], rate_per_s=0.1, burst=3).key,
    }
    port = free_port()
    log = tmp_path / "mcp-http.log"
    command = [sys.executable, "-m", "memlane", "mcp", "--transport", "http", "--port", str(port)]
    with log.open("w") as out:
        process = subprocess.Popen(
            command, cwd=tmp_path, env=server_env(MEMLANE_DATABASE_URL=pg), stdout=out, stderr=out
        )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        for _ in range(400):
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                assert process.poll() is None, log.read_text()
                time.sleep(0.05)
        yield url, keys
    finally:
        process.terminate()
        process.wait(timeout=20)


async def calls(url: str, key: str, *steps: tuple[str, dict[str, Any]]) -> list[Any]:
    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {key}"}, timeout=30)
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        return [await client.call_tool(name, arguments) for name, arguments in steps]


def text_of(result: Any) -> str:
    return " ".join(getattr(part, "text", "") for part in result.content)


def test_a_scoped_key_reaches_its_tenants_users_only(
    keyed_server: tuple[str, dict[str, str]],
) -> None:
    url, keys = keyed_server
    own, other, unnamed = asyncio.run(
        calls(
            url,
            keys["acme"],
            ("remember", {"fact": FACT, "user_id": "acme:maya"}),
            ("list_memories", {"user_id": "globex:maya"}),
            ("recall", {"query": "bees"}),
        )
    )
    assert not own.is_error and own.structured_content["memory"]["user_id"] == "acme:maya"
    assert other.is_error and "no user 'globex:maya' for this key" in text_of(other)
    assert unnamed.is_error and "give `user_id`" in text_of(unnamed)
    # the other tenant's key does not see acme's memory, nor write there
    seen, wrote = asyncio.run(
        calls(
            url,
            keys["globex"],
            ("search", {"query": "bees", "user_id": "acme:maya"}),
            ("remember", {"fact": "I like tea.", "user_id": "acme:maya"}),
        )
    )
    assert seen.is_error and wrote.is_error and "for this key" in text_of(wrote)
    # a read key reads its users and cannot write them
    read, write = asyncio.run(
        calls(
            url,
            keys["acme-reader"],
            ("search", {"query": "bees", "user_id": "acme:maya"}),
            (
                "forget",
                {"memory_id": own.structured_content["memory"]["id"], "user_id": "acme:maya"},
            ),
        )
    )
    assert not read.is_error and FACT in text_of(read)
    assert write.is_error and "write scope" in text_of(write)
    # no key, or a wrong one: 401 before the SDK
    hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"accept": "application/json, text/event-stream"}
    assert httpx.post(url, json=hello, headers=accept).status_code == 401
    # globex's key is limited (burst 3, one each 10 s): its session used them up
    limited = httpx.post(
        url, json=hello, headers=accept | {"authorization": f"Bearer {keys['globex']}"}
    )
    assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
