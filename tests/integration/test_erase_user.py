"""Erasing a user deletes every row of theirs, in every table, on both backends: a scan
of the whole database finds neither their id nor a word only they said; other users
are untouched; another process's working set drops them; the doors agree."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from memlane.api.app import create_app
from memlane.config.settings import load_settings
from memlane.models.db import get_engine
from memlane.models.tables import Base
from memlane.service.facade import Memlane
from tests.integration.test_cli import cli

VICTIM, OTHER, CANARY = "victim-7x", "other-3k", "zanzibarquokka"


@pytest.fixture
def lane(db_url: str) -> Iterator[Memlane]:
    with Memlane(load_settings(database_url=db_url, working_set_mb=64)) as lane:
        yield lane


def talk(lane: Memlane, user: str, word: str) -> None:
    lane.enqueue(
        {
            "conversation_id": f"chat-{user}",
            "user_id": user,
            "messages": [
                {"role": "user", "content": f"I prefer {word} tea every morning."},
                {"role": "assistant", "content": f"Noted: {word} tea."},
                {"role": "user", "content": f"My name is Robin and I love {word} walks."},
            ],
            "final": True,
        }
    )
    lane.flush()
    noted = lane.add_memory(user, {"content": f"Keeps a {word} notebook.", "tier": "pinned"})
    # the edit's event keeps the old content; the memory keeps the word
    lane.update_memory(user, noted.id, content=f"Keeps a {word} notebook and a pen.")
    # a purged memory leaves a fingerprint under the user's secret
    gone = lane.add_memory(user, {"content": f"Owns a {word} kettle from Kyoto."})
    lane.purge(user, gone.id)
    lane.set_soul_block(user, "style", f"Answer like a {word} expert.")
    lane.add_procedure(user, "brew", f"Steep the {word} leaves for 3 minutes.")
    assert word in lane.assemble(user, f"{word} tea").text
    lane.flush()  # the pack and the access records are written


def hits(url: str, *needles: str) -> dict[str, int]:
    """Rows per table holding any of `needles` anywhere in any column."""
    found: dict[str, int] = {}
    with get_engine(url).connect() as conn:
        for table in Base.metadata.sorted_tables:
            rows = conn.execute(select(table)).all()
            n = sum(1 for row in rows if any(needle in repr(tuple(row)) for needle in needles))
            if n:
                found[table.name] = n
    return found


def test_an_erased_user_leaves_no_row_anywhere(lane: Memlane, db_url: str, now: datetime) -> None:
    talk(lane, VICTIM, CANARY)
    talk(lane, OTHER, "oolong")
    other_before = hits(db_url, OTHER, "oolong")
    assert set(hits(db_url, VICTIM, CANARY)) >= {
        "conversations", "messages", "jobs", "memories", "memory_keywords", "episodes",
        "soul_blocks", "procedures", "context_packs", "user_state", "memory_events",
        "user_secrets", "memory_fingerprints",
    }  # fmt: skip
    with Memlane(load_settings(database_url=db_url, working_set_mb=64)) as reader:
        assert CANARY in reader.assemble(VICTIM, f"{CANARY} tea", now=now).text  # cached
        refused = cli(db_url, "users", "erase", "--user", VICTIM)
        assert refused.exit_code == 2 and "--yes" in refused.output
        erased = cli(db_url, "users", "erase", "--user", VICTIM, "--yes")
        assert erased.exit_code == 0, erased.output
        assert hits(db_url, VICTIM, CANARY) == {}
        # another process's working set drops the user at its next assembly
        assert CANARY not in reader.assemble(VICTIM, f"{CANARY} tea", now=now).text
        assert "oolong" in reader.assemble(OTHER, "oolong tea", now=now).text
    after = hits(db_url, OTHER, "oolong")
    assert after.pop("context_packs") == other_before.pop("context_packs") + 1  # the reader's
    assert after == other_before
    # the user may come back, as a new user
    lane.add_memory(VICTIM, {"content": "Likes maps."})
    listed = lane.list_memories(VICTIM, status=None)
    # every field of what is there, so a failure says where an extra or missing row came from
    assert [(m.content, m.status) for m in listed] == [("Likes maps.", "active")], [
        (m.model_dump(mode="json"), lane.memory_history(VICTIM, m.id)) for m in listed
    ]


def test_the_api_erases_and_reports_what_it_deleted(lane: Memlane, db_url: str) -> None:
    talk(lane, VICTIM, CANARY)
    with TestClient(create_app(lane)) as client:
        answer = client.delete(f"/v1/users/{VICTIM}")
        assert answer.status_code == 200
        deleted = answer.json()["deleted"]
        assert deleted["memories"] >= 2 and deleted["messages"] == 3
        assert client.delete(f"/v1/users/{VICTIM}").json()["deleted"]["memories"] == 0
    assert hits(db_url, VICTIM, CANARY) == {}


def test_a_task_for_an_erased_users_job_does_nothing(lane: Memlane, db_url: str) -> None:
    from memlane.workers import runner

    talk(lane, VICTIM, CANARY)
    job_ids = [job.id for job in lane.jobs(user_id=VICTIM)]
    lane.erase_user(VICTIM)
    for job_id in job_ids:  # a redelivered message after the erasure
        assert runner.run_extract(job_id, lane.settings).next == "skipped"
        assert runner.run_store(job_id, lane.settings).next == "skipped"
    assert hits(db_url, VICTIM, CANARY) == {}


def test_a_pack_in_flight_when_its_user_is_erased_is_not_saved(db_url: str, now: datetime) -> None:
    """A pack assembled before the erasure reaches the store after it (another process's
    background writer): the erasure's fence refuses it, saves the other user's packs of
    the same batch, and lifts after erasures.FENCE, at the latest by the sweep."""
    from datetime import timedelta

    from memlane.models.db import unit_of_work
    from memlane.models.store.users import erase as users
    from memlane.models.store.users import erasures, packs
    from memlane.models.tables import ContextPackRow, Erasure

    def pack(n: int, user: str) -> tuple[str, str, datetime, str]:
        return (f"pack_{n}", user, now, json.dumps({"query": f"{CANARY} tea"}))

    with unit_of_work(db_url) as s:
        users.erase(s, VICTIM, now=now)
    with unit_of_work(db_url) as s:
        packs.save_packs(s, [pack(1, VICTIM), pack(2, OTHER)], now=now)
    assert hits(db_url, VICTIM) == {}
    assert hits(db_url, OTHER) == {"context_packs": 1}
    later = now + erasures.FENCE + timedelta(seconds=1)
    with unit_of_work(db_url) as s:  # the user came back after the fence
        packs.save_packs(s, [pack(3, VICTIM)], now=later)
    assert hits(db_url, VICTIM) == {"context_packs": 1}
    with unit_of_work(db_url) as s:
        assert erasures.lift_expired(s, now=later) == 1
        assert s.scalars(select(Erasure)).all() == []
        assert s.get(ContextPackRow, "pack_3") is not None


def test_an_erasure_started_first_holds_back_a_concurrent_pack_save(
    db_url: str, now: datetime
) -> None:
    """The race itself: while an erasure's transaction is open, a pack save of that user
    waits for it (PostgreSQL: the user's lock, shared; SQLite: the one writer) and then
    sees its fence, instead of landing after the delete."""
    import threading

    from memlane.models.db import unit_of_work
    from memlane.models.store.users import erase as users
    from memlane.models.store.users import packs

    lane_settings = load_settings(database_url=db_url)
    with Memlane(lane_settings) as lane:
        lane.add_memory(VICTIM, {"content": f"Keeps a {CANARY} notebook."})
    saved = threading.Event()

    def save() -> None:
        try:
            with unit_of_work(db_url) as s:
                packs.save_packs(s, [("pack_x", VICTIM, now, "{}")], now=now)
        except Exception:  # SQLite may refuse a stale snapshot: the pack is dropped either way
            pass
        saved.set()

    with unit_of_work(db_url) as s:
        users.erase(s, VICTIM, now=now)
        saver = threading.Thread(target=save)
        saver.start()
        assert not saved.wait(0.3)  # held back while the erasure is uncommitted
    saver.join(timeout=30)
    assert saved.is_set()
    assert hits(db_url, VICTIM, CANARY) == {}
