"""Anthropic's top-level `system` over the HTTP API and the facade, into real PostgreSQL:
stored as the conversation's first message, role system, once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from memlane.api.app import create_app
from memlane.config.settings import load_settings
from memlane.models.db import get_engine
from memlane.pipeline.errors import TranscriptError
from memlane.service.facade import Memlane

SYSTEM = [
    {"type": "text", "text": "You are Maya's travel assistant."},
    {"type": "text", "text": "Answer briefly.", "cache_control": {"type": "ephemeral"}},
]
MESSAGES = [
    {"role": "user", "content": [{"type": "text", "text": "I moved to Porto last month."}]},
    {"role": "assistant", "content": [{"type": "text", "text": "Welcome to Porto!"}]},
]


@pytest.fixture
def lane(pg: str) -> Iterator[Memlane]:
    with Memlane(load_settings(database_url=pg)) as lane:
        yield lane


def stored(url: str, conversation_id: str) -> list[tuple[int, str, str]]:
    with get_engine(url).connect() as conn:
        rows = conn.execute(
            text("SELECT seq, role, content FROM messages WHERE conversation_id = :c ORDER BY seq"),
            {"c": conversation_id},
        )
        return [(int(r.seq), str(r.role), str(r.content)) for r in rows]


def body(conversation_id: str, **changes: Any) -> dict[str, Any]:
    return {
        "conversation_id": conversation_id,
        "user_id": "maya",
        "system": SYSTEM,
        "messages": MESSAGES,
        **changes,
    }


def test_the_http_api_stores_a_top_level_system_as_the_first_message(
    lane: Memlane, pg: str
) -> None:
    with TestClient(create_app(lane)) as client:
        response = client.post("/v1/transcripts", json=body("c-http"))
        assert response.status_code == 202, response.text
        assert response.json()["stored_messages"] == 3
        # re-sent as it is: nothing stored twice
        assert client.post("/v1/transcripts", json=body("c-http")).json()["stored_messages"] == 0
        refused = client.post("/v1/transcripts", json=body("c-other", model="claude-x"))
    assert stored(pg, "c-http") == [
        (0, "system", "You are Maya's travel assistant.\n\nAnswer briefly."),
        (1, "user", "I moved to Porto last month."),
        (2, "assistant", "Welcome to Porto!"),
    ]
    assert refused.status_code == 422
    error = refused.json()["error"]
    assert error["code"] == "invalid_transcript" and "unknown field 'model'" in error["message"]
    assert "system" in error["message"] and stored(pg, "c-other") == []


def test_the_facade_stores_it_too_and_a_changed_system_is_named(lane: Memlane, pg: str) -> None:
    lane.enqueue(body("c-facade", system="Answer briefly."))
    assert stored(pg, "c-facade")[0] == (0, "system", "Answer briefly.")
    # Without message ids a transcript repeats the conversation: its system included.
    with pytest.raises(TranscriptError, match="system differs from the conversation's stored"):
        lane.enqueue(body("c-facade", system="Answer at length."))
