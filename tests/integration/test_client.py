"""memlane.client against the real API served by uvicorn on 127.0.0.1 (a separate
process, real PostgreSQL, the embedded worker): every route has a method in both
clients, answers are the API's models, errors are typed, 503 alone is retried."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from memlane.api.app import openapi_document
from memlane.client import AsyncClient, Client, route_of
from memlane.client.errors import (
    BudgetExceeded,
    Conflict,
    ConnectionFailed,
    InvalidTranscript,
    NotFound,
    Unauthorized,
    Unavailable,
)
from memlane.models.schemas import FleetStatus, MemoryPublic
from memlane.pipeline.errors import BudgetError, NotFoundError, TranscriptError
from tests.integration.conftest import _truncate as truncate

ROOT = Path(__file__).resolve().parents[2]
CHAT = ROOT / "tests" / "data" / "chat_formats"
KEY = "client-test-key-5d1c"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    url: str
    log: Path

    def requests_to(self, path: str) -> int:
        """How many requests for `path` uvicorn's access log shows."""
        return sum(f'"GET {path} ' in line for line in self.log.read_text().splitlines())


def serve(tmp: Path, **env: str) -> Iterator[Server]:
    port = free_port()
    log = tmp / f"uvicorn-{port}.log"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
    command = [sys.executable, "-m", "uvicorn", "--factory", "memlane.api.app:create_app"]
    with log.open("w") as out:
        process = subprocess.Popen(
            [*command, "--host", "127.0.0.1", "--port", str(port)],
            cwd=tmp,
            env={**clean, "MEMLANE_API_KEYS": KEY, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, log.read_text()
            time.sleep(0.05)
        yield Server(url, log)
    finally:
        process.terminate()
        process.wait(timeout=20)


@pytest.fixture(scope="module")
def server(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    truncate(pg_url)
    yield from serve(tmp_path_factory.mktemp("api"), MEMLANE_DATABASE_URL=pg_url)


@pytest.fixture(scope="module")
def unready(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # A database that answers nothing: /readyz is 503 for as long as the server runs.
    database = f"postgresql+psycopg://memlane@127.0.0.1:{free_port()}/memlane"
    yield from serve(tmp_path_factory.mktemp("api"), MEMLANE_DATABASE_URL=database)


def test_every_route_of_the_openapi_document_has_a_method_in_both_clients() -> None:
    routes = {
        (method.upper(), path)
        for path, methods in openapi_document()["paths"].items()
        for method in methods
    }
    for kind in (Client, AsyncClient):
        marked = {
            found
            for _, member in inspect.getmembers(kind, inspect.isfunction)
            if (found := route_of(member)) is not None
        }
        assert marked == routes, kind.__name__
    for name, member in inspect.getmembers(Client, inspect.isfunction):
        if route_of(member) is not None:
            assert inspect.iscoroutinefunction(getattr(AsyncClient, name)), name


def test_the_sync_client_drives_the_whole_api(server: Server) -> None:
    user = "client-sync"
    body = json.loads((CHAT / "openai_tool_conversation.json").read_text())
    body.update(user_id=user, conversation_id="client-sync-c1", final=True)
    with Client(server.url, api_key=KEY) as memlane:
        assert memlane.health() == {"status": "ok"}
        assert memlane.ready()["status"] == "ready"
        result = memlane.enqueue(body)
        assert result.ignored_fields == {"field:annotations": 2, "field:audio": 1}
        assert set(memlane.wait(result.job_ids, timeout=60).values()) == {"done"}
        with pytest.raises(Conflict):
            memlane.retry_job(result.job_ids[0])  # done, not failed
        assert memlane.sweep_jobs().extract == []  # nothing left queued

        stored = memlane.list_memories(user).memories
        assert "User lives in Porto." in [m.content for m in stored]
        assert all(isinstance(m, MemoryPublic) for m in stored)
        added = memlane.add_memory(user, "User's name is Maya.", tier="verified")
        assert memlane.get_memory(user, added.id) == added
        assert memlane.pin(user, added.id).tier == "pinned"
        assert memlane.update_memory(user, added.id, sensitive=True).sensitive
        again = memlane.add_memory(user, "user's name is maya")  # a duplicate: confirmed
        assert again.id == added.id and again.access_count == 2
        when = datetime(2030, 1, 1, tzinfo=UTC)
        edited = memlane.update_memory(
            user, added.id, content="User's name is Maya Silva.", importance=0.9, expires_at=when
        )
        assert (edited.content, edited.importance, edited.expires_at) == (
            "User's name is Maya Silva.", 0.9, when
        )  # fmt: skip
        assert memlane.update_memory(user, added.id, clear_expiry=True).expires_at is None
        events = memlane.memory_history(user, added.id)
        assert [e.kind for e in events] == [
            "created", "pinned", "marked_sensitive", "confirmed", "edited", "edited"
        ]  # fmt: skip
        assert {e.actor for e in events} == {"api"}  # the test key has no name
        memlane.forget(user, added.id)
        assert added.id not in [m.id for m in memlane.iter_memories(user)]
        assert memlane.list_memories(user, status="deleted", limit=5).memories[0].id == added.id
        memlane.purge(user, added.id)
        assert [e.kind for e in memlane.memory_history(user, added.id)] == ["purged"]

        soul = memlane.set_soul_block(user, "style", "Answer briefly.")
        assert memlane.soul_blocks(user) == [soul]
        procedure = memlane.add_procedure(user, "deploy", "Run the checks, then tag.")
        assert memlane.procedures(user) == [procedure]
        memlane.delete_procedure(user, "deploy")
        memlane.delete_soul_block(user, "style")
        assert memlane.procedures(user) == [] and memlane.soul_blocks(user) == []

        hits = memlane.search(user, "where does the user live?", limit=2)
        assert hits[0].memory.content == "User lives in Porto." and len(hits) == 2
        assert hits[0].score > 0 and hits[0].relevance > 0

        answer = memlane.context(user, "where does the user live?", budget_tokens=800)
        assert "Porto" in answer.context and answer.pack.budget_tokens == 800
        pack = None
        for _ in range(100):  # packs are written in the background
            try:
                pack = memlane.pack(answer.pack.pack_id)
                break
            except NotFound:
                time.sleep(0.05)
        assert pack is not None and pack["pack_id"] == answer.pack.pack_id

        assert "memlane_" in memlane.metrics()

        exported = memlane.export_user(user, messages=True)
        assert exported.splitlines()[0].startswith('{"kind":"memlane-export"')
        with pytest.raises(Conflict):  # its own ids are stored
            memlane.import_user(user, exported)
        assert memlane.import_user(user, exported, merge=True).imported["memories"] == 0
        deleted = memlane.delete_conversation(user, "client-sync-c1")
        assert deleted.conversation_id == "client-sync-c1" and deleted.deleted["messages"] > 0
        assert "User lives in Porto." not in [m.content for m in memlane.iter_memories(user)]
        erased = memlane.erase_user(user)
        assert erased.user_id == user and memlane.list_memories(user, status="all").memories == []


def test_errors_are_typed_from_the_apis_codes(server: Server) -> None:
    with Client(server.url, api_key=KEY) as memlane:
        with pytest.raises(NotFound) as missing:
            memlane.get_memory("client-errors", "mem_does_not_exist")
        assert isinstance(missing.value, NotFoundError) and missing.value.status == 404
        with pytest.raises(InvalidTranscript) as bad:
            memlane.enqueue({"conversation_id": "c", "user_id": "u", "messages": []})
        assert isinstance(bad.value, TranscriptError) and "messages" in bad.value.message
    with Client(server.url, api_key="wrong") as stranger, pytest.raises(Unauthorized):
        stranger.list_memories("client-errors")
    assert server.requests_to("/v1/users/client-errors/memories/mem_does_not_exist") == 1


def test_budget_exceeded_is_a_typed_budget_error_in_both_clients(server: Server) -> None:
    # A one-token budget cannot hold even the XML around an empty context: the server
    # answers 422 budget_exceeded with budget and required, and both clients raise it typed.
    def check(error: BudgetExceeded) -> None:
        assert isinstance(error, BudgetError) and (error.status, error.code) == (
            422,
            "budget_exceeded",
        )
        assert error.budget == 1 and error.required > 1 and error.over_by == error.required - 1
        assert "budget" in error.message

    with Client(server.url, api_key=KEY) as memlane, pytest.raises(BudgetExceeded) as sync:
        memlane.context("leo", "x", budget_tokens=1)
    check(sync.value)

    async def ask() -> None:
        async with AsyncClient(server.url, api_key=KEY) as memlane:
            await memlane.context("leo", "x", budget_tokens=1)

    with pytest.raises(BudgetExceeded) as asynchronous:
        asyncio.run(ask())
    check(asynchronous.value)
    assert asynchronous.value.details == sync.value.details


def test_the_address_and_key_come_from_the_environment(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMLANE_CLIENT_URL", server.url)
    monkeypatch.setenv("MEMLANE_CLIENT_KEY", KEY)
    with Client() as memlane:
        assert memlane.list_memories("client-env").next_cursor is None


def test_a_503_is_retried_with_backoff_then_raised(unready: Server) -> None:
    with Client(unready.url, api_key=KEY, retries=2, backoff=0.1) as memlane:
        started = time.monotonic()
        with pytest.raises(Unavailable) as caught:
            memlane.ready()
        waited = time.monotonic() - started
    assert caught.value.code == "not_ready" and "database" in caught.value.details["checks"]
    assert unready.requests_to("/readyz") == 3  # the first try and two retries
    assert waited >= 0.1 + 0.2


def test_the_fleet_status_is_a_typed_answer(server: Server) -> None:
    with Client(server.url, api_key=KEY) as memlane:
        status = memlane.status()
    assert isinstance(status, FleetStatus)
    assert (status.status, status.mode) == ("ok", "embedded")


def test_an_unreachable_api_is_a_clear_error() -> None:
    unreachable = Client(f"http://127.0.0.1:{free_port()}", retries=0)
    with unreachable, pytest.raises(ConnectionFailed, match="MEMLANE_CLIENT_URL"):
        unreachable.health()


def test_the_async_client_drives_the_api(server: Server) -> None:
    user = "client-async"
    body = json.loads((CHAT / "anthropic_tool_conversation.json").read_text())
    body.update(user_id=user, conversation_id="client-async-c1", final=True)

    async def session() -> tuple[list[str], str, list[str]]:
        async with AsyncClient(server.url, api_key=KEY) as memlane:
            result = await memlane.enqueue(body)
            assert set((await memlane.wait(result.job_ids, timeout=60)).values()) == {"done"}
            added = await memlane.add_memory(user, "User's name is Maya.")
            await memlane.pin(user, added.id)
            contents = [m.content for m in (await memlane.list_memories(user)).memories]
            answer = await memlane.context(user, "where does the user live?", budget_tokens=800)
            await memlane.update_memory(user, added.id, content="User's name is Maya Silva.")
            history = await memlane.memory_history(user, added.id)
            assert [e.kind for e in history] == ["created", "pinned", "edited"]
            await memlane.forget(user, added.id)
            await memlane.purge(user, added.id)
            try:
                await memlane.get_memory(user, "mem_nope")
            except NotFound as exc:
                missing = exc.code
            left = [m.id async for m in memlane.iter_memories(user, page_size=1)]
            assert added.id not in left
            return contents, answer.context + missing, left

    contents, context, _ = asyncio.run(session())
    assert "User lives in Porto." in contents and "User's name is Maya." in contents
    assert not [c for c in contents if "Madrid" in c]
    assert "Porto" in context and context.endswith("not_found")
