"""Chat apps' own message formats (OpenAI chat, Anthropic messages) through every front
door, against real PostgreSQL / SQLite: stored as marked context, extracted from only
what was said, unknown message fields counted."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from typer.testing import CliRunner

from memlane.api.app import create_app
from memlane.cli.app import app
from memlane.config.settings import load_settings
from memlane.models.db import unit_of_work
from memlane.models.store.conversations import messages as conversations
from memlane.models.tables import Message
from memlane.service.facade import Memlane

DATA = Path(__file__).resolve().parents[1] / "data" / "chat_formats"
OPENAI_FILE = DATA / "openai_tool_conversation.json"
ANTHROPIC_FILE = DATA / "anthropic_tool_conversation.json"
SAID = {"User lives in Porto.", "User prefers window seats.", "User is vegetarian."}
TOOL_WORDS = ("Madrid", "aisle", "peanut")


def payload(path: Path, **changes: Any) -> dict[str, Any]:
    return {**json.loads(path.read_text()), **changes}


def assert_memories_are_what_the_user_said(contents: list[str]) -> None:
    assert set(contents) >= SAID, contents
    assert not [c for c in contents if any(word in c for word in TOOL_WORDS)], contents


def stored_roles(url: str, conversation_id: str) -> list[str]:
    with unit_of_work(url) as session:
        return list(
            session.scalars(
                select(Message.role)
                .where(Message.conversation_id == conversation_id)
                .order_by(Message.seq)
            )
        )


@pytest.mark.parametrize("source", [OPENAI_FILE, ANTHROPIC_FILE], ids=["openai", "anthropic"])
def test_the_facade_takes_a_tool_using_conversation_as_sent(db_url: str, source: Path) -> None:
    body = payload(source, final=True)
    with Memlane(load_settings(database_url=db_url)) as lane:
        result = lane.enqueue(body)
        assert result.stored_messages == len(body["messages"]) and result.ignored_fields
        assert set(lane.wait(result.job_ids, timeout=60).values()) == {"done"}
        contents = [m.content for m in lane.list_memories("maya")]
        again = lane.enqueue(body)  # the same payload again: nothing stored twice
    assert_memories_are_what_the_user_said(contents)
    assert again.stored_messages == 0 and again.skipped_messages == len(body["messages"])
    assert "tool" in stored_roles(db_url, body["conversation_id"])


def test_assistant_messages_count_toward_the_cadence_only_with_text(pg: str) -> None:
    body = payload(OPENAI_FILE)
    with Memlane(load_settings(database_url=pg)) as lane:
        lane.enqueue(body)
    with unit_of_work(pg) as session:
        seqs = conversations.assistant_seqs(session, body["conversation_id"])
    # 5 assistant turns, 2 of them nothing but tool calls
    assert seqs == [5, 9]


@pytest.fixture
def api(pg: str) -> Iterator[TestClient]:
    with Memlane(load_settings(database_url=pg)) as lane, TestClient(create_app(lane)) as client:
        yield client


def test_the_http_api_takes_both_formats(api: TestClient, pg: str) -> None:
    for source in (ANTHROPIC_FILE, OPENAI_FILE):
        body = payload(source, final=True)
        body["conversation_id"] += "-http"
        response = api.post("/v1/transcripts", json=body)
        assert response.status_code == 202, response.text
        assert response.json()["ignored_fields"]
        for job_id in response.json()["job_ids"]:
            for _ in range(300):
                if api.get(f"/v1/jobs/{job_id}").json()["status"] in {"done", "failed"}:
                    break
                time.sleep(0.1)
        assert api.get(f"/v1/jobs/{job_id}").json()["status"] == "done"
    memories = api.get("/v1/users/maya/memories").json()["memories"]
    assert_memories_are_what_the_user_said([m["content"] for m in memories])


def test_the_http_api_names_a_mixed_transcript(api: TestClient, pg: str) -> None:
    openai, anthropic = payload(OPENAI_FILE), payload(ANTHROPIC_FILE)
    body = {**openai, "format": "auto", "messages": openai["messages"][:3]}
    body["messages"].append(anthropic["messages"][1])
    response = api.post("/v1/transcripts", json=body)
    assert response.status_code == 422
    assert "an Anthropic one" in response.json()["error"]["message"]
    assert stored_roles(pg, body["conversation_id"]) == []


def test_the_cli_enqueues_a_chat_apps_file_and_says_what_it_ignored(sqlite_url: str) -> None:
    env = {"MEMLANE_DATABASE_URL": sqlite_url}
    done = CliRunner().invoke(app, ["enqueue", "--final", "--wait", str(OPENAI_FILE)], env=env)
    assert done.exit_code == 0, done.stderr
    assert "ignored (not read): field:annotations ×2, field:audio ×1" in done.stderr
    listed = CliRunner().invoke(app, ["memories", "list", "--user", "maya", "--json"], env=env)
    assert listed.exit_code == 0, listed.stderr
    assert_memories_are_what_the_user_said([m["content"] for m in json.loads(listed.stdout)])
