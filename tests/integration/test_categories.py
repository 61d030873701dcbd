"""Categories as configuration (MEMLANE_CATEGORIES), on both backends: a configured
category is taken at the API and the CLI and a category outside the set is refused
there (422 naming the set, nothing written); the LLM extractor is asked for the set; a
memory stored under a category later removed still lists, exports, searches and
assembles."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from memlane.api.app import create_app
from memlane.config.settings import load_settings
from memlane.pipeline.errors import InvalidInputError
from memlane.service.facade import Memlane
from tests.integration.test_api import error_of
from tests.integration.test_cli import cli
from tests.integration.test_inspector_access import sign_in
from tests.integration.test_mcp import data, server_env
from tests.llm_stub import LLMStub

WITH_HOBBY = "preference,fact,decision,project,hobby"
CELLO = "User plays the cello every Sunday."


def lane_with(db_url: str, **settings: Any) -> Memlane:
    return Memlane(load_settings(database_url=db_url, **settings))


@pytest.fixture
def hobby_lane(db_url: str) -> Iterator[Memlane]:
    with lane_with(db_url, categories=WITH_HOBBY) as lane:
        yield lane


def test_a_configured_category_is_taken_at_the_api_and_the_cli(
    hobby_lane: Memlane, db_url: str
) -> None:
    with TestClient(create_app(hobby_lane)) as client:
        added = client.post("/v1/users/u1/memories", json={"content": CELLO, "category": "hobby"})
        assert added.status_code == 201, added.text
        assert added.json()["category"] == "hobby"
        found = client.post("/v1/search", json={"user_id": "u1", "category": "hobby"})
        assert found.status_code == 200, found.text
        assert [hit["memory"]["content"] for hit in found.json()] == [CELLO]
    done = cli(
        db_url,
        *("memories", "add", "--user", "u2", "--content", "User collects stamps."),
        *("--category", "hobby", "--json"),
        MEMLANE_CATEGORIES=WITH_HOBBY,
    )
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["memory"]["category"] == "hobby"


def test_the_mcp_server_takes_the_configured_set(db_url: str, tmp_path: Path) -> None:
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memlane", "mcp", "--user", "u1"],
        env=server_env(MEMLANE_DATABASE_URL=db_url, MEMLANE_CATEGORIES="fact,hobby"),
        cwd=tmp_path,
    )

    async def session() -> tuple[Any, Any]:
        async with Client(server) as client:
            taken = await client.call_tool("remember", {"fact": CELLO, "category": "hobby"})
            refused = await client.call_tool("remember", {"fact": "x y z", "category": "project"})
            return taken, refused

    taken, refused = asyncio.run(session())
    assert data(taken)["memory"]["category"] == "hobby"
    assert refused.is_error and "'project'" in str(refused.content)
    assert "fact, hobby" in str(refused.content)


def test_a_category_outside_the_set_is_refused_naming_the_set(db_url: str) -> None:
    with lane_with(db_url) as lane, TestClient(create_app(lane)) as client:
        refused = client.post("/v1/users/u1/memories", json={"content": CELLO, "category": "hobby"})
        assert refused.status_code == 422, refused.text
        error = error_of(refused)
        assert error["code"] == "validation_error"
        assert "'hobby'" in error["message"]
        assert "preference, fact, decision, project" in error["message"]
        filtered = client.post("/v1/search", json={"user_id": "u1", "category": "hobby"})
        assert filtered.status_code == 422, filtered.text
        assert lane.list_memories("u1") == []  # nothing written
    done = cli(
        db_url,
        *("memories", "add", "--user", "u1", "--content", CELLO, "--category", "hobby"),
        MEMLANE_CATEGORIES="fact,decision",
    )
    assert done.exit_code != 0
    assert "fact, decision" in done.output
    with lane_with(db_url) as lane:
        assert lane.list_memories("u1") == []


@pytest.fixture
def removed(hobby_lane: Memlane) -> str:
    """The id of a memory stored under `hobby`, a category the tests then leave out."""
    stored = hobby_lane.add_memory("u1", {"content": CELLO, "category": "hobby"})
    hobby_lane.close()
    return stored.id


def test_a_memory_under_a_removed_category_stays_readable(removed: str, db_url: str) -> None:
    with lane_with(db_url) as lane:  # the default set: hobby removed
        assert [(m.id, m.category) for m in lane.list_memories("u1")] == [(removed, "hobby")]
        exported = [json.loads(line) for line in lane.export_user("u1")]
        rows = [line["row"] for line in exported if line.get("kind") == "memories"]
        assert [(row["content"], row["category"]) for row in rows] == [(CELLO, "hobby")]
        assert CELLO in lane.assemble("u1", "What does the user play on Sundays?").text
        assert [hit.memory.id for hit in lane.search("u1", "cello")] == [removed]
        # an edit that leaves the category alone keeps it; a new one must be configured
        kept = lane.update_memory("u1", removed, importance=0.9, category="hobby")
        assert (kept.category, kept.importance) == ("hobby", 0.9)
        with TestClient(create_app(lane)) as client:
            listed = client.get("/v1/users/u1/memories")
            assert listed.status_code == 200, listed.text
            assert "hobby" in listed.text
            moved = client.patch(f"/v1/users/u1/memories/{removed}", json={"category": "sport"})
            assert moved.status_code == 422, moved.text
            assert "sport" in error_of(moved)["message"]


def test_the_inspector_shows_a_removed_category_and_filters_on_the_set(
    removed: str, db_url: str
) -> None:
    key = "cats-inspector-key"
    with (
        lane_with(db_url, api_keys=[f"lead:{key}"]) as lane,
        TestClient(create_app(lane), follow_redirects=False) as client,
    ):
        sign_in(client, key)
        page = client.get(f"/ui/users/u1/memories/{removed}")
        assert page.status_code == 200, page.text
        assert '<option value="hobby" selected>hobby</option>' in page.text
        listed = client.get("/ui/users/u1")
        assert listed.status_code == 200 and CELLO in listed.text
        assert client.get("/ui/users/u1", params={"category": "hobby"}).status_code == 422


def test_importing_a_removed_category_is_refused_by_line_and_field(
    removed: str, db_url: str
) -> None:
    with lane_with(db_url) as lane:  # an import writes: the set it meets is checked
        lines = list(lane.export_user("u1"))
        with pytest.raises(InvalidInputError, match=r"line \d+: memories.category: 'hobby'"):
            lane.import_user(lines, user_id="u9")
        assert lane.list_memories("u9") == []


def test_the_llm_is_asked_for_the_configured_set(db_url: str) -> None:
    with LLMStub() as stub:
        stub.answer(
            memories=[
                {"content": CELLO, "category": "hobby", "importance": 0.6, "confidence": 1.0},
                {
                    "content": "User is Robin.",
                    "category": "preference",
                    "importance": 0.9,
                    "confidence": 1.0,
                },
            ]
        )
        settings = {"llm_model": "openai/stub-model", "llm_api_base": stub.base_url}
        with lane_with(db_url, llm_api_key="x", categories="fact,hobby", **settings) as lane:
            lane.enqueue(
                {
                    "conversation_id": "c1",
                    "user_id": "u1",
                    "messages": [
                        {"role": "user", "content": "I play the cello every Sunday."},
                        {"role": "assistant", "content": "Lovely."},
                    ],
                    "final": True,
                }
            )
            lane.flush(timeout=120)  # the first call imports litellm: seconds on a busy box
            stored = lane.list_memories("u1")
        (sent,) = stub.requests
    system = sent["messages"][0]["content"]
    assert '"category": "fact|hobby"' in system
    assert "one of fact (about the user" in system and ", hobby." in system
    assert "decision" not in system.split("Memories:")[1].split("importance")[0]
    # a category outside the set is dropped from the answer, not stored
    assert [(m.content, m.category) for m in stored] == [(CELLO, "hobby")]


def test_the_offline_extractor_files_under_the_configured_set(db_url: str) -> None:
    with lane_with(db_url, categories="hobby,fact") as lane:
        lane.enqueue(
            {
                "conversation_id": "c1",
                "user_id": "u1",
                "messages": [
                    {"role": "user", "content": "I love green tea. I live in Lisbon."},
                    {"role": "assistant", "content": "Noted."},
                ],
                "final": True,
            }
        )
        lane.flush(timeout=60)
        stored = {m.content: m.category for m in lane.list_memories("u1")}
    # a preference is not configured: the first configured category; a fact stays one
    assert sorted(stored.values()) == ["fact", "hobby"], stored
    assert stored[next(c for c in stored if "Lisbon" in c)] == "fact"
