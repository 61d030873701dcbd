"""Editable memories with history: every kind of change of a memory lands in its
`memory_events` with its actor, a corrected content is re-keyed and re-embedded (and
reaches a warm working set), and adding a duplicate confirms instead of copying. Both
backends; the facade here, the API and CLI at the end."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from memlane.api.app import create_app
from memlane.config.settings import load_settings
from memlane.models.db import unit_of_work
from memlane.models.store.reads import dedup as dedup_reads
from memlane.models.store.users import change_feed as changes
from memlane.models.tables import MemoryKeyword, MemoryRow
from memlane.pipeline.dedup.keywords import keywords
from memlane.pipeline.errors import ConflictError, InvalidInputError, NotFoundError
from memlane.service.facade import Memlane
from tests.integration.test_cli import cli
from tests.integration.test_forgetting import say


def kinds(lane: Memlane, memory_id: str) -> list[tuple[str, str]]:
    return [(e.kind, e.actor) for e in lane.memory_history("u1", memory_id)]


def test_history_records_every_kind_of_change_with_its_actor(lane: Memlane) -> None:
    say(lane, "c1", "I prefer green tea over coffee.")
    [memory] = lane.list_memories("u1")
    [created] = lane.memory_history("u1", memory.id)
    assert (created.kind, created.actor) == ("created", "worker")
    assert created.detail["conversation_id"] == "c1"
    assert created.detail["job_id"] == memory.source_job_id
    assert (created.detail["from_seq"], created.detail["to_seq"]) == (0, 0)

    say(lane, "c2", "I prefer green tea over coffee.")  # confirmed by another conversation
    lane.update_memory("u1", memory.id, importance=0.95, category="fact")
    lane.pin("u1", memory.id)
    lane.verify("u1", memory.id)
    lane.set_tier("u1", memory.id, "candidate", actor="api:ops")
    lane.quarantine("u1", memory.id)
    lane.update_memory("u1", memory.id, status="active")
    lane.mark_sensitive("u1", memory.id)
    lane.mark_sensitive("u1", memory.id, False)
    lane.forget("u1", memory.id)
    say(lane, "c3", "I prefer green tea over coffee.")  # kept out: forgotten
    lane.update_memory("u1", memory.id, status="active")
    assert kinds(lane, memory.id) == [
        ("created", "worker"),
        ("confirmed", "worker"),
        ("edited", "python"),
        ("pinned", "python"),
        ("verified", "python"),
        ("demoted", "api:ops"),
        ("quarantined", "python"),
        ("restored", "python"),
        ("marked_sensitive", "python"),
        ("unmarked_sensitive", "python"),
        ("forgotten", "python"),
        ("suppressed", "worker"),
        ("restored", "python"),
    ]
    events = lane.memory_history("u1", str(memory.ref))  # the short id names it too
    assert events[2].detail == {
        "changes": {"category": ["preference", "fact"], "importance": [0.7, 0.95]}
    }
    assert events[1].detail["increment"] == 1
    assert [e.id for e in events] == sorted(e.id for e in events)

    lane.purge("u1", memory.id)  # the content goes, with the edits' old values
    assert kinds(lane, memory.id) == [("purged", "python")]
    with pytest.raises(NotFoundError):
        lane.memory_history("u1", "mem_000000000000000000000000")
    with pytest.raises(NotFoundError):
        lane.memory_history("u2", memory.id)  # another user's memory is not theirs


def test_a_superseded_memory_names_what_superseded_it(lane: Memlane) -> None:
    say(lane, "c1", "I prefer green tea over coffee.")
    [old] = lane.list_memories("u1")
    say(lane, "c2", "I no longer prefer green tea over coffee.")
    [new] = lane.list_memories("u1")
    superseded = lane.memory_history("u1", old.id)[-1]
    assert (superseded.kind, superseded.actor) == ("superseded", "worker")
    assert superseded.detail["by"] == new.id
    assert superseded.detail["job_id"] == new.source_job_id


def test_a_corrected_content_is_rekeyed_reembedded_and_reaches_a_warm_view(
    lane: Memlane, db_url: str, now: datetime
) -> None:
    memory = lane.add_memory("u1", {"content": "Drinks oolong after lunch."})
    lane.warm("u1")
    assert "oolong" in lane.assemble("u1", "oolong", now=now).text
    text = "Drinks rooibos after dinner."
    edited = lane.update_memory("u1", memory.id, {"content": text})
    assert edited.content == text and edited.id == memory.id and edited.ref == memory.ref
    with unit_of_work(db_url) as session:
        row = session.get(MemoryRow, memory.id)
        assert row is not None
        assert set(row.keywords) == set(keywords(text))
        assert row.embedding == pytest.approx(lane.embedder.embed([text])[0], abs=1e-6)
        indexed = session.scalars(
            select(MemoryKeyword.keyword).where(MemoryKeyword.memory_id == memory.id)
        )
        assert set(indexed) == set(keywords(text))
        found = dedup_reads.candidates(
            session, "u1", [(text, keywords(text))], threshold=0.6, min_keywords=3
        )
        assert [m.id for m in found] == [memory.id]
    context = lane.assemble("u1", "rooibos", now=now).text  # the warm view followed
    assert "rooibos" in context and "oolong" not in context


def test_edits_of_figures_and_expiry_and_a_change_of_nothing(lane: Memlane, db_url: str) -> None:
    memory = lane.add_memory("u1", {"content": "Works at the harbour office."})
    until = datetime(2027, 1, 1, tzinfo=UTC)
    edited = lane.update_memory(
        "u1", memory.id, confidence=0.7, category="project", expires_at=until
    )
    assert (edited.confidence, edited.category, edited.expires_at) == (0.7, "project", until)
    with unit_of_work(db_url) as session:
        version = changes.version(session, "u1")
    same = lane.update_memory("u1", memory.id, confidence=0.7, tier="candidate")
    assert same == edited  # nothing changed: no event, no change number
    with unit_of_work(db_url) as session:
        assert changes.version(session, "u1") == version
    cleared = lane.update_memory("u1", memory.id, expires_at=None)
    assert cleared.expires_at is None
    history = lane.memory_history("u1", memory.id)
    assert [e.kind for e in history] == ["created", "edited", "edited"]
    assert history[1].detail["changes"]["expires_at"] == [None, until.isoformat()]
    assert history[2].detail["changes"] == {"expires_at": [until.isoformat(), None]}
    with pytest.raises(InvalidInputError, match="importance"):
        lane.update_memory("u1", memory.id, importance=2)
    lane.forget("u1", memory.id)
    with pytest.raises(ConflictError, match="forgotten"):
        lane.update_memory("u1", memory.id, content="Works from home.")
    # restoring comes first, so a forgotten memory is restored and corrected at once
    back = lane.update_memory("u1", memory.id, status="active", content="Works from home.")
    assert (back.status, back.content) == ("active", "Works from home.")


def test_adding_a_duplicate_confirms_it_and_a_forgotten_one_is_refused(
    lane: Memlane,
) -> None:
    first = lane.add_memory("u1", {"content": "Prefers TypeScript for web projects."})
    again, created = lane.add_or_confirm(
        "u1",
        {"content": "prefers typescript for web projects", "importance": 0.9, "tier": "pinned"},
    )
    assert not created and again.id == first.id
    assert (again.access_count, again.importance, again.tier) == (2, 0.9, "pinned")
    assert again.confirmed_at > first.confirmed_at
    assert len(lane.list_memories("u1")) == 1
    confirmed = lane.memory_history("u1", first.id)[-1]
    assert confirmed.kind == "confirmed"
    assert confirmed.detail == {"by": "add", "tier": ["candidate", "pinned"]}
    other, created = lane.add_or_confirm("u1", {"content": "Lives in Lisbon near the river."})
    assert created and other.id != first.id
    lane.forget("u1", first.id)
    with pytest.raises(ConflictError, match="forgotten: restore it"):
        lane.add_memory("u1", {"content": "Prefers TypeScript for web projects."})


def test_the_api_records_the_key_name_and_answers_history(db_url: str) -> None:
    settings = load_settings(database_url=db_url, api_keys="alice:s3cret,legacy:with:colons")
    with Memlane(settings) as lane, TestClient(create_app(lane)) as client:
        alice = {"authorization": "Bearer s3cret"}
        base = "/v1/users/u1/memories"
        added = client.post(base, json={"content": "Plays the cello on Sundays."}, headers=alice)
        assert added.status_code == 201
        memory_id = added.json()["id"]
        again = client.post(base, json={"content": "Plays the cello on Sundays."}, headers=alice)
        assert again.status_code == 200 and again.json()["id"] == memory_id
        assert again.json()["access_count"] == 2
        patched = client.patch(
            f"{base}/{memory_id}",
            json={"content": "Plays the viola on Sundays.", "importance": 0.8},
            headers={"authorization": "Bearer with:colons"},  # a key with a colon, named
        )
        assert patched.status_code == 200 and patched.json()["content"].startswith(
            "Plays the viola"
        )
        whole = {"authorization": "Bearer alice:s3cret"}  # an entry as a whole: unnamed
        assert client.patch(
            f"{base}/{memory_id}", json={"tier": "pinned"}, headers=whole
        ).is_success
        history = client.get(f"{base}/{memory_id}/history", headers=alice)
        assert history.status_code == 200
        assert [(e["kind"], e["actor"]) for e in history.json()] == [
            ("created", "api:alice"),
            ("confirmed", "api:alice"),
            ("edited", "api:legacy"),
            ("pinned", "api"),
        ]
        assert client.get(f"{base}/{memory_id}/history").status_code == 401
        refused = client.patch(f"{base}/{memory_id}", json={"content": ""}, headers=alice)
        assert refused.status_code == 422
        expiry = client.patch(
            f"{base}/{memory_id}", json={"expires_at": "2030-01-01T00:00:00"}, headers=alice
        )
        assert expiry.json()["expires_at"].startswith("2030-01-01T00:00:00")
        cleared = client.patch(f"{base}/{memory_id}", json={"expires_at": None}, headers=alice)
        assert cleared.json()["expires_at"] is None
        assert client.delete(f"{base}/{memory_id}?purge=true", headers=alice).status_code == 204
        gone = client.get(f"{base}/{memory_id}/history", headers=alice).json()
        assert [(e["kind"], e["actor"], e["detail"]) for e in gone] == [("purged", "api:alice", {})]
        assert client.get(f"{base}/mem_x/history", headers=alice).status_code == 404


def test_the_cli_edits_shows_history_and_confirms_duplicates(db_url: str) -> None:
    added = cli(db_url, "memories", "add", "--user", "u1", "--content", "Runs along the canal.")
    assert added.exit_code == 0
    memory_id = added.stdout.strip()
    again = cli(db_url, "memories", "add", "--user", "u1", "--content", "runs along the canal")
    assert again.exit_code == 0 and again.stdout.strip() == memory_id
    assert "confirmed it, seen 2 times" in again.stderr
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    edited = cli(
        db_url, "memories", "edit", "--user", "u1", memory_id,
        "--content", "Runs along the river.", "--expires", tomorrow, "--json",
    )  # fmt: skip
    assert edited.exit_code == 0, edited.output
    assert '"content": "Runs along the river."' in edited.stdout
    assert cli(db_url, "memories", "edit", "--user", "u1", memory_id).exit_code == 2
    both = cli(
        db_url, "memories", "edit", "--user", "u1", memory_id, "--expires", tomorrow,
        "--no-expiry",
    )  # fmt: skip
    assert both.exit_code == 2
    shown = cli(db_url, "memories", "history", "--user", "u1", memory_id, "--json")
    assert shown.exit_code == 0
    events = json.loads(shown.stdout)
    assert [(e["kind"], e["actor"]) for e in events] == [
        ("created", "cli"),
        ("confirmed", "cli"),
        ("edited", "cli"),
    ]
    assert events[2]["detail"]["changes"]["content"] == [
        "Runs along the canal.",
        "Runs along the river.",
    ]
    table = cli(db_url, "memories", "history", "--user", "u1", memory_id)
    assert table.exit_code == 0 and "edited" in table.stdout and "cli" in table.stdout
