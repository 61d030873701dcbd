"""A user's memories a page at a time (Memlane.memories_page, GET /v1/users/{u}/memories)
and one fact remembered as dedup would (Memlane.remember), on both backends."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from memlane.api.app import create_app
from memlane.config.settings import load_settings
from memlane.pipeline.errors import ConflictError, InvalidInputError
from memlane.service.facade import Memlane

FACTS = [
    "Maya lives in Porto near the river.",
    "Maya drinks green tea every morning.",
    "Maya plays the cello in an orchestra.",
    "Maya is learning Japanese on weekends.",
    "Maya rides a red bicycle to work.",
]


def test_pages_are_newest_first_and_exact_while_the_store_changes(db_url: str) -> None:
    with Memlane(load_settings(database_url=db_url)) as lane:
        added = [lane.add_memory("maya", {"content": fact}).id for fact in FACTS]
        lane.add_memory("someone-else", {"content": "Someone else likes opera a lot."})
        first = lane.memories_page("maya", limit=2)
        assert [m.id for m in first.memories] == added[::-1][:2]
        # Written between pages: a new memory (newer than every page) and a bump of an
        # old one's fields. An offset would now show a memory twice; the cursor does not.
        newest = lane.add_memory("maya", {"content": "Maya adopted a grey cat last spring."}).id
        lane.pin("maya", added[0])
        second = lane.memories_page("maya", limit=2, cursor=first.next_cursor)
        third = lane.memories_page("maya", limit=2, cursor=second.next_cursor)
        assert [m.id for m in second.memories] == added[::-1][2:4]
        assert [m.id for m in third.memories] == [added[0]] and third.next_cursor is None
        assert third.memories[0].tier == "pinned"
        assert lane.memories_page("maya", limit=10).memories[0].id == newest

        lane.forget("maya", added[2])
        deleted = lane.memories_page("maya", status="deleted", limit=1)
        assert [m.id for m in deleted.memories] == [added[2]] and deleted.next_cursor is None
        every = lane.memories_page("maya", status=None, limit=100)
        assert len(every.memories) == 6 and every.next_cursor is None

        with pytest.raises(InvalidInputError, match="cursor"):
            lane.memories_page("maya", cursor="not-a-cursor")


def test_the_api_pages_by_cursor_and_refuses_a_made_up_one(pg: str) -> None:
    with TestClient(create_app(settings=load_settings(database_url=pg))) as client:
        base = "/v1/users/maya/memories"
        for fact in FACTS:
            assert client.post(base, json={"content": fact}).status_code == 201
        seen: list[str] = []
        cursor = None
        while True:
            params = {"limit": 2} | ({"cursor": cursor} if cursor else {})
            page = client.get(base, params=params).json()
            seen += [m["content"] for m in page["memories"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert seen == FACTS[::-1]
        bad = client.get(base, params={"cursor": "bm9wZQ"})
        assert bad.status_code == 422 and bad.json()["error"]["code"] == "validation_error"


def test_a_fact_is_remembered_once_and_a_forgotten_one_stays_forgotten(db_url: str) -> None:
    with Memlane(load_settings(database_url=db_url)) as lane:
        stored = lane.remember("maya", "Maya lives in Porto near the river.")
        assert stored.outcome == "stored"
        again = lane.remember("maya", {"content": "Maya lives near the river in Porto."})
        assert again.outcome == "known" and again.memory.id == stored.memory.id
        # confirmed, as add_memory confirms a duplicate: seen once more, with its event
        assert again.memory.access_count == stored.memory.access_count + 1
        assert [e.kind for e in lane.memory_history("maya", stored.memory.id)][-1] == "confirmed"
        assert [m.id for m in lane.list_memories("maya")] == [stored.memory.id]

        lane.forget("maya", stored.memory.id)
        with pytest.raises(ConflictError, match="forgotten"):
            lane.remember("maya", "Maya lives in Porto near the river.")
        assert lane.list_memories("maya") == []
        other = lane.remember("maya", "Maya plays the cello in an orchestra.")
        assert other.outcome == "stored" and other.memory.content.startswith("Maya plays")
