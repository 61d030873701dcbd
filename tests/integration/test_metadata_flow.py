"""Metadata travels from the transcript to what is learned from it, on both backends: new
memories and the episode take the conversation's metadata, a memory confirmed in another
conversation merges it (a key of two values holds both), a transcript sent again updates
the conversation's key by key, a memory added by hand takes its own; listing filters on
it; bad metadata and bad filters are refused naming the bad part, nothing written."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from memlane.api.app import create_app
from memlane.models.db import get_engine
from memlane.models.tables import Conversation, EpisodeRow
from memlane.pipeline.errors import InvalidInputError, TranscriptError
from memlane.pipeline.metadata.values import MetadataError
from memlane.service.facade import Memlane
from tests.integration.test_api import error_of
from tests.integration.test_cli import cli
from tests.integration.test_mcp import data, server_env

TEA = "I love green tea."
WORK = "I work as a data engineer at a small bakery in Lisbon."


def _send(lane: Memlane, conversation_id: str, text: str, metadata: dict[str, Any]) -> None:
    lane.enqueue(
        {
            "conversation_id": conversation_id,
            "user_id": "u1",
            "metadata": metadata,
            "messages": [
                {"role": "user", "content": text},
                {"role": "assistant", "content": "Noted."},
            ],
            "final": True,
        }
    )
    lane.flush(timeout=60)


def _by_content(lane: Memlane, **kwargs: Any) -> dict[str, dict[str, Any]]:
    return {m.content: m.metadata for m in lane.list_memories("u1", **kwargs)}


def test_memories_and_episodes_keep_their_conversations_metadata(
    lane: Memlane, db_url: str
) -> None:
    _send(lane, "c1", f"{TEA} {WORK}", {"team": "eng", "day": "2026-01-05"})
    _send(lane, "c2", WORK, {"team": "ops", "score": 3})
    stored = _by_content(lane)
    work = next(c for c in stored if "Lisbon" in c)
    tea = next(c for c in stored if "tea" in c)
    # confirmed in c2: both teams, in a fixed order; c1's day and c2's score both kept
    assert stored[work] == {"team": ["eng", "ops"], "day": "2026-01-05", "score": 3}
    assert stored[tea] == {"team": "eng", "day": "2026-01-05"}
    with get_engine(db_url).connect() as conn:
        episodes = dict(conn.execute(sa.select(EpisodeRow.conversation_id, EpisodeRow.meta)).all())
    assert episodes == {
        "c1": {"team": "eng", "day": "2026-01-05"},
        "c2": {"team": "ops", "score": 3},
    }
    # filters on the list: a list value matches any of its elements
    assert set(_by_content(lane, filter={"team": "ops"})) == {work}
    assert set(_by_content(lane, filter={"team": "eng"})) == {work, tea}
    assert set(_by_content(lane, filter={"not": {"team": "ops"}})) == {tea}
    assert set(_by_content(lane, filter={"score": {"gte": 3}})) == {work}
    assert _by_content(lane, filter={"nobody": {"exists": True}}) == {}


def test_a_transcript_sent_again_updates_its_conversations_metadata_key_by_key(
    lane: Memlane, db_url: str
) -> None:
    _send(lane, "c1", TEA, {"team": "eng", "stage": "draft"})
    _send(lane, "c1", TEA, {"stage": "final"})
    _send(lane, "c1", TEA, {})
    with get_engine(db_url).connect() as conn:
        kept = conn.execute(sa.select(Conversation.meta)).scalar_one()
    assert kept == {"team": "eng", "stage": "final"}


def test_a_memory_added_by_hand_takes_its_metadata_and_a_confirmation_merges(
    lane: Memlane,
) -> None:
    added = lane.add_memory("u1", {"content": WORK, "metadata": {"source": "crm"}})
    assert added.metadata == {"source": "crm"}
    again = lane.add_memory("u1", {"content": WORK, "metadata": {"source": "form", "n": 1}})
    assert again.id == added.id
    assert again.metadata == {"source": ["crm", "form"], "n": 1}


@pytest.mark.parametrize(
    ("metadata", "where"),
    [
        ({"team": None}, "metadata: at team: null is not a value"),
        ({"team": {"a": 1}}, "metadata: at team: a value is"),
        ({"tags": ["a", ["b"]]}, "metadata: at tags.1: a value is"),
        ({"not": 1}, "metadata: at not: `not` is a word of the filter language"),
        ({"big": "x" * 9000}, "metadata: at most 8192 bytes"),
    ],
)
def test_bad_metadata_is_refused_naming_the_bad_part_and_nothing_is_written(
    lane: Memlane, metadata: dict[str, Any], where: str
) -> None:
    with pytest.raises(InvalidInputError) as refused:
        lane.add_memory("u1", {"content": TEA, "metadata": metadata})
    assert where in str(refused.value)
    with pytest.raises(TranscriptError) as rejected:
        lane.enqueue(
            {
                "conversation_id": "c1",
                "user_id": "u1",
                "metadata": metadata,
                "messages": [{"role": "user", "content": TEA}],
            }
        )
    assert where in str(rejected.value)
    assert lane.list_memories("u1") == []


def test_a_bad_filter_is_refused_naming_the_bad_part(lane: Memlane) -> None:
    with pytest.raises(MetadataError) as refused:
        lane.list_memories("u1", filter={"or": [{"team": "eng"}, {"score": {"between": 1}}]})
    assert str(refused.value).startswith("filter.or.1.score.between: unknown operator")
    assert refused.value.path == ("or", 1, "score", "between")


def test_over_http_metadata_is_taken_and_lists_filter_with_422_naming_the_bad_part(
    lane: Memlane,
) -> None:
    with TestClient(create_app(lane)) as client:
        sent = client.post(
            "/v1/transcripts",
            json={
                "conversation_id": "c1",
                "user_id": "u1",
                "metadata": {"team": "eng"},
                "messages": [
                    {"role": "user", "content": TEA},
                    {"role": "assistant", "content": "Noted."},
                ],
                "final": True,
            },
        )
        assert sent.status_code == 202, sent.text
        lane.flush(timeout=60)
        added = client.post(
            "/v1/users/u1/memories", json={"content": WORK, "metadata": {"team": "ops"}}
        )
        assert added.status_code == 201, added.text
        assert added.json()["metadata"] == {"team": "ops"}

        def listed(raw: str) -> list[str]:
            page = client.get("/v1/users/u1/memories", params={"filter": raw})
            assert page.status_code == 200, page.text
            return [m["content"] for m in page.json()["memories"]]

        assert listed('{"team": "ops"}') == [WORK]
        assert [c for c in listed('{"team": {"in": ["eng"]}}') if "tea" in c] != []
        assert len(listed("{}")) == 2
        bad = client.get("/v1/users/u1/memories", params={"filter": '{"team": {"in": 3}}'})
        assert bad.status_code == 422, bad.text
        assert "filter.team.in: `in` takes a non-empty list" in error_of(bad)["message"]
        not_json = client.get("/v1/users/u1/memories", params={"filter": "{team"})
        assert not_json.status_code == 422, not_json.text
        assert error_of(not_json)["message"].startswith("filter: not JSON")
        refused = client.post(
            "/v1/transcripts",
            json={
                "conversation_id": "c2",
                "user_id": "u1",
                "metadata": {"team": [1, {"x": 1}]},
                "messages": [{"role": "user", "content": TEA}],
            },
        )
        assert refused.status_code == 422, refused.text
        assert "team.1" in refused.text


def test_the_cli_takes_metadata_and_filters(db_url: str) -> None:
    def run(*args: str) -> str:
        done = cli(db_url, *args, MEMLANE_EMBEDDING_MODEL="hashing")
        assert done.exit_code == 0, done.output
        return str(done.output)

    run("memories", "add", "--user", "u1", "--content", TEA, "--metadata", '{"team": "eng"}')
    run("memories", "add", "--user", "u1", "--content", WORK, "--metadata", '{"team": "ops"}')
    listed = json.loads(
        run("memories", "list", "--user", "u1", "--filter", '{"team": "ops"}', "--json")
    )
    assert [(m["content"], m["metadata"]) for m in listed] == [(WORK, {"team": "ops"})]
    hits = json.loads(
        run("search", "--user", "u1", "-q", "tea bakery", "--filter", '{"team": "eng"}', "--json")
    )
    assert [h["memory"]["content"] for h in hits] == [TEA]
    context = run("assemble", "--user", "u1", "--filter", '{"not": {"team": "eng"}}')
    assert WORK in context and TEA not in context
    exported = run("users", "export", "--user", "u1", "--filter", '{"team": "ops"}').splitlines()
    rows = [json.loads(line) for line in exported[1:]]
    assert [r["row"]["content"] for r in rows if r["kind"] == "memories"] == [WORK]
    bad = cli(db_url, "memories", "list", "--user", "u1", "--filter", '{"team": {"lt": "soon"}}')
    assert bad.exit_code != 0
    assert "filter.team.lt: a range's bound is a number or an ISO 8601 date" in bad.output


def test_export_takes_a_filter_and_the_export_keeps_metadata(lane: Memlane) -> None:
    kept = lane.add_memory("u1", {"content": TEA, "metadata": {"team": "eng"}})
    lane.add_memory("u1", {"content": WORK, "metadata": {"team": "ops"}})
    lines = list(lane.export_user("u1", filter={"team": "eng"}))
    rows = [json.loads(line) for line in lines[1:]]
    assert [r["row"]["id"] for r in rows if r["kind"] == "memories"] == [kept.id]
    assert {r["row"]["memory_id"] for r in rows if r["kind"] == "memory_events"} == {kept.id}
    lane.import_user(lines, user_id="u2")
    assert [(m.content, m.metadata) for m in lane.list_memories("u2")] == [(TEA, {"team": "eng"})]
    with pytest.raises(MetadataError):  # before any line
        lane.export_user("u1", filter={"team": {"in": []}})
    bad = [lines[0], lines[1].replace('"metadata":{"team":"eng"}', '"metadata":{"team":null}')]
    with pytest.raises(InvalidInputError, match=r"memories\.metadata"):
        lane.import_user(bad, user_id="u3")


def test_forget_matching_forgets_what_the_filter_passes(lane: Memlane) -> None:
    tea = lane.add_memory("u1", {"content": TEA, "metadata": {"team": "eng"}})
    work = lane.add_memory("u1", {"content": WORK, "metadata": {"team": ["eng", "ops"]}})
    lane.add_memory("u1", {"content": "I collect old maps of the Baltic coast.", "metadata": {}})
    with TestClient(create_app(lane)) as client:
        done = client.post("/v1/users/u1/memories/forget", json={"filter": {"team": "ops"}})
        assert done.status_code == 200, done.text
        assert done.json() == {"forgotten": [work.id]}
        everything = client.post("/v1/users/u1/memories/forget", json={"filter": {}})
        assert everything.status_code == 422, everything.text
    assert {m.id for m in lane.list_memories("u1", status="deleted")} == {work.id}
    assert [m.id for m in lane.forget_matching("u1", '{"team": "eng"}')] == [tea.id]
    assert [m.content for m in lane.list_memories("u1")] == [
        "I collect old maps of the Baltic coast."
    ]


def test_the_mcp_tools_take_metadata_and_filters(db_url: str, tmp_path: Path) -> None:
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memlane", "mcp", "--user", "u1"],
        env=server_env(MEMLANE_DATABASE_URL=db_url, MEMLANE_EMBEDDING_MODEL="hashing"),
        cwd=tmp_path,
    )

    async def session() -> tuple[Any, Any, Any, Any]:
        async with Client(server) as client:
            await client.call_tool("remember", {"fact": TEA, "metadata": {"team": "eng"}})
            await client.call_tool("remember", {"fact": WORK, "metadata": {"team": "ops"}})
            listed = await client.call_tool("list_memories", {"filter": {"team": "ops"}})
            found = await client.call_tool(
                "search", {"query": "tea bakery", "filter": {"team": "eng"}}
            )
            recalled = await client.call_tool(
                "recall", {"query": "work", "filter": {"team": "ops"}}
            )
            refused = await client.call_tool(
                "recall", {"query": "x", "filter": {"team": {"gt": []}}}
            )
            return listed, found, recalled, refused

    listed, found, recalled, refused = asyncio.run(session())
    assert [m["content"] for m in data(listed)["memories"]] == [WORK]
    assert [h["memory"]["content"] for h in data(found)] == [TEA]
    assert WORK in data(recalled) and TEA not in data(recalled)
    assert refused.is_error and "filter.team.gt" in str(refused.content)
