"""The clients' key methods against a served API (uvicorn in its own process, SQLite):
an admin key makes, lists, rotates and revokes keys; a made key reaches its users only,
and the typed errors say why a call was refused (NotFound, Forbidden, Unauthorized)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from memlane.client import AsyncClient, Client
from memlane.client.errors import Forbidden, NotFound, Unauthorized
from memlane.models import migrate
from tests.integration.test_client import KEY, Server, serve


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    url = f"sqlite:///{tmp_path / 'keys.db'}"
    migrate.upgrade(url)
    yield from serve(tmp_path, MEMLANE_DATABASE_URL=url, MEMLANE_EMBEDDING_MODEL="hashing")


def test_the_clients_manage_keys_and_a_made_key_is_held_to_its_reach(server: Server) -> None:
    with Client(server.url, api_key=KEY) as admin:
        made = admin.create_key("acme-reader", scopes=["read"], users=["acme:*"])
        assert made.key.startswith("mlk_") and made.info.state == "active"
        assert [k.name for k in admin.list_keys()] == ["acme-reader"]
        admin.add_memory("acme:1", "I grow tomatoes.")
    with Client(server.url, api_key=made.key, retries=0) as reader:
        assert [m.content for m in reader.list_memories("acme:1").memories] == ["I grow tomatoes."]
        with pytest.raises(NotFound):
            reader.list_memories("globex:1")
        with pytest.raises(Forbidden, match="write scope"):
            reader.add_memory("acme:1", "I grow beans.")
        with pytest.raises(Forbidden):
            reader.list_keys()

    async def rotate() -> str:
        async with AsyncClient(server.url, api_key=KEY) as admin:
            rotated = await admin.rotate_key("acme-reader", grace_s=0)
            return rotated.key

    new = asyncio.run(rotate())
    with Client(server.url, api_key=made.key, retries=0) as old, pytest.raises(Unauthorized):
        old.list_memories("acme:1")
    with Client(server.url, api_key=new) as fresh:
        assert fresh.list_memories("acme:1").memories
    with Client(server.url, api_key=KEY) as admin:
        revoked = admin.revoke_key("acme-reader")
        assert {k.state for k in revoked} == {"revoked"}
    with Client(server.url, api_key=new, retries=0) as gone, pytest.raises(Unauthorized):
        gone.list_memories("acme:1")
