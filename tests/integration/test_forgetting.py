"""Forgetting stays forgotten: a forgotten memory is not learned again from a later
conversation, takes no change but restore or purge, and purge deletes it for good (the
working set of another process drops it too). Both backends, facade, CLI and HTTP."""

from __future__ import annotations

from datetime import datetime

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from memlane.api.app import create_app
from memlane.config.settings import load_settings
from memlane.models.db import get_engine
from memlane.models.tables import MemoryKeyword, MemoryRow
from memlane.pipeline.errors import ConflictError, NotFoundError
from memlane.service.facade import Memlane
from tests.integration.test_cli import cli


def say(lane: Memlane, conversation: str, text: str) -> None:
    lane.enqueue(
        {
            "conversation_id": conversation,
            "user_id": "u1",
            "messages": [
                {"role": "user", "content": text},
                {"role": "assistant", "content": "Ok."},
            ],
            "final": True,
        }
    )
    lane.flush()


def active(lane: Memlane) -> list[str]:
    return sorted(m.content for m in lane.list_memories("u1"))


def test_a_forgotten_fact_is_not_learned_again(lane: Memlane, now: datetime) -> None:
    say(lane, "c1", "I prefer green tea over coffee.")
    [memory] = lane.list_memories("u1")
    lane.forget("u1", memory.id)
    say(lane, "c2", "I prefer green tea over coffee.")  # stated again, elsewhere
    assert active(lane) == []
    memory_lines = [
        line for line in lane.assemble("u1", "tea", now=now).text.splitlines() if "<m " in line
    ]
    assert not any("green tea" in line for line in memory_lines)
    say(lane, "c3", "I live in Lisbon.")  # other facts are learned as before
    assert len(active(lane)) == 1
    restored = lane.update_memory("u1", memory.id, status="active")
    assert restored.status == "active" and len(active(lane)) == 2


def test_a_forgotten_memory_takes_only_restore_or_purge(lane: Memlane, db_url: str) -> None:
    memory = lane.add_memory("u1", {"content": "Likes jazz records."})
    lane.forget("u1", memory.id)
    for action in (
        lambda: lane.pin("u1", memory.id),
        lambda: lane.mark_sensitive("u1", memory.id),
        lambda: lane.quarantine("u1", memory.id),
    ):
        with pytest.raises(ConflictError, match="forgotten: restore it first"):
            action()
    with TestClient(create_app(lane)) as client:
        answer = client.patch(f"/v1/users/u1/memories/{memory.id}", json={"tier": "pinned"})
        assert answer.status_code == 409 and answer.json()["error"]["code"] == "conflict"
        refused = cli(db_url, "memories", "purge", "--user", "u1", memory.id)
        assert refused.exit_code == 2 and "--yes" in refused.output
        assert client.delete(f"/v1/users/u1/memories/{memory.id}?purge=true").status_code == 204
    with pytest.raises(NotFoundError):
        lane.get_memory("u1", memory.id)
    with get_engine(db_url).connect() as conn:
        for table in (MemoryRow, MemoryKeyword):
            assert conn.execute(select(func.count()).select_from(table)).scalar_one() == 0


def test_a_purged_memory_leaves_every_working_set(
    lane: Memlane, db_url: str, now: datetime
) -> None:
    memory = lane.add_memory("u1", {"content": "Drinks oolong after lunch."})
    with Memlane(load_settings(database_url=db_url)) as reader:
        assert "oolong" in reader.assemble("u1", "oolong", now=now).text
        purged = cli(db_url, "memories", "purge", "--user", "u1", memory.id, "--yes")
        assert purged.exit_code == 0 and memory.id in purged.output
        assert "oolong" not in reader.assemble("u1", "oolong", now=now).text
