"""Forgetting that stays forgotten across a purge: a purged fact said again in a later
conversation is not stored (the job counts it), a different fact is, the fingerprints
hold none of the words, lifting them lets the fact back, and erasing the user takes the
secret. Both backends, through the real pipeline (the offline extractor)."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import select

from memlane.api.app import create_app
from memlane.models.db import get_engine
from memlane.models.tables import MemoryFingerprint, UserSecret
from memlane.pipeline.dedup.keywords import keywords
from memlane.service.facade import Memlane
from tests.integration.test_cli import cli

FACT = "I prefer jasmine tea with honey every morning."


def say(lane: Memlane, conversation: str, *texts: str) -> str:
    """The conversation's last job's id."""
    result = lane.enqueue(
        {
            "conversation_id": conversation,
            "user_id": "u1",
            "messages": [
                m
                for t in texts
                for m in ({"role": "user", "content": t}, {"role": "assistant", "content": "Ok."})
            ],
            "final": True,
        }
    )
    lane.flush()
    return result.job_ids[-1]


def active(lane: Memlane) -> list[str]:
    return sorted(m.content for m in lane.list_memories("u1"))


def rows(db_url: str, table: type) -> list[str]:
    with get_engine(db_url).connect() as conn:
        return [repr(tuple(row)) for row in conn.execute(select(table.__table__)).all()]


def test_a_purged_fact_is_not_learned_again_until_lifted(lane: Memlane, db_url: str) -> None:
    say(lane, "c1", FACT)
    [memory] = lane.list_memories("u1")
    lane.purge("u1", memory.id)
    job_id = say(lane, "c2", FACT, "I live in Lisbon.")  # the fact again, and a new one
    assert [m for m in active(lane) if "jasmine" in m.lower()] == []
    assert any("Lisbon" in m for m in active(lane))  # a different fact is stored
    assert lane.job(job_id).suppressed == 1
    assert lane.list_memories("u1", status="deleted") == []  # nothing kept of its text

    # content-free: no word of the fact, its keywords or its text in either table
    stored = rows(db_url, MemoryFingerprint) + rows(db_url, UserSecret)
    assert len(stored) == 2
    for word in ("jasmine", "honey", "morning", "tea", "prefer", *keywords(memory.content)):
        assert not any(word.lower() in row.lower() for row in stored), word
    assert memory.content not in " ".join(stored)

    refused = cli(db_url, "memories", "lift-fingerprints", "--user", "u1")
    assert refused.exit_code == 2 and "--yes" in refused.output
    lifted = cli(db_url, "memories", "lift-fingerprints", "--user", "u1", "--yes")
    assert lifted.exit_code == 0 and "lifted 1" in lifted.output, lifted.output
    again = say(lane, "c3", FACT)
    assert any("jasmine" in m.lower() for m in active(lane))
    assert lane.job(again).suppressed == 0


def test_a_fact_added_by_hand_after_its_purge_is_confirmed_not_suppressed(
    lane: Memlane,
) -> None:
    say(lane, "c1", FACT)
    [memory] = lane.list_memories("u1")
    lane.purge("u1", memory.id)
    added = lane.add_memory("u1", {"content": memory.content})
    job_id = say(lane, "c2", FACT)
    assert lane.job(job_id).suppressed == 0
    assert lane.get_memory("u1", added.id).access_count == 2


def test_the_api_and_client_route_lifts_and_erase_takes_the_secret(
    lane: Memlane, db_url: str
) -> None:
    say(lane, "c1", FACT)
    lane.purge("u1", lane.list_memories("u1")[0].id)
    with TestClient(create_app(lane)) as client:
        answer = client.delete("/v1/users/u1/fingerprints")
        assert answer.status_code == 200 and answer.json() == {"user_id": "u1", "lifted": 1}
    assert rows(db_url, MemoryFingerprint) == [] and len(rows(db_url, UserSecret)) == 1
    lane.erase_user("u1")
    assert rows(db_url, UserSecret) == []


def test_a_forgotten_fact_counts_as_suppressed_too(lane: Memlane) -> None:
    say(lane, "c1", FACT)
    [memory] = lane.list_memories("u1")
    lane.forget("u1", memory.id)
    assert lane.job(say(lane, "c2", FACT)).suppressed == 1
