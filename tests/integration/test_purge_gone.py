"""Purge means gone: after a purge, a scan of every table of the database (listed from the
database itself, not from memlane's metadata) finds the purged fact's distinctive words
only in the raw messages, which retention and conversation delete own: not in jobs' kept
extractions, episodes, context packs, histories or indexes. Another process's working set
drops it, this one's caches of rendered texts are emptied; another user's same words
are untouched. Both backends, through the real
pipeline (the offline extractor). And forget and purge wait for the user's lock, as the
store stage takes it (PostgreSQL: SQLite has one writer at a time anyway)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Connection, text

from memlane.config.settings import load_settings
from memlane.models.db import get_engine, unit_of_work
from memlane.models.schemas import TranscriptIn
from memlane.models.store.conversations import jobs
from memlane.models.store.conversations import messages as conversations
from memlane.models.store.memories.memories import user_lock_key
from memlane.pipeline.assembly.parts import count_line
from memlane.pipeline.dedup.keywords import stem
from memlane.pipeline.dedup.redaction import MARKER
from memlane.pipeline.extraction.cadence import WindowSpec
from memlane.service.facade import Memlane

OWNER, BYSTANDER = "owner-7q", "bystander-3k"
FACT = "I have a pet axolotl named Quetzalcoatl."
OTHER = "I love hiking in Patagonia."
WORDS = ("axolotl", "quetzalcoatl")


def table_names(url: str) -> list[str]:
    """Every table the database holds, as the database lists them."""
    engine = get_engine(url)
    listing = (
        "SELECT table_name FROM information_schema.tables"
        " WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
        if engine.dialect.name == "postgresql"
        else "SELECT name FROM sqlite_master WHERE type = 'table'"
    )
    with engine.connect() as conn:
        return sorted(conn.scalars(text(listing)))


def grep(url: str, *words: str, unless: str | None = None) -> dict[str, int]:
    """Rows per table whose whole text (every column: PostgreSQL's row cast to text,
    SQLite's values) holds any of `words`, case-insensitively; rows holding `unless`
    (another user's id) are not counted."""
    engine = get_engine(url)
    postgres = engine.dialect.name == "postgresql"
    found: dict[str, int] = {}
    with engine.connect() as conn:
        for name in table_names(url):
            query = (
                f'SELECT CAST(t AS text) FROM "{name}" AS t'
                if postgres
                else f'SELECT * FROM "{name}"'
            )
            rows = [repr(tuple(row)).casefold() for row in conn.execute(text(query))]
            n = sum(
                1
                for row in rows
                if any(w in row for w in words) and (unless is None or unless not in row)
            )
            if n:
                found[name] = n
    return found


@pytest.fixture
def lane(db_url: str) -> Iterator[Memlane]:
    with Memlane(load_settings(database_url=db_url, working_set_mb=64)) as lane:
        yield lane


def say(lane: Memlane, user: str, conversation: str, *texts: str) -> None:
    messages = []
    for said in texts:
        messages += [{"role": "user", "content": said}, {"role": "assistant", "content": "Ok."}]
    lane.enqueue(
        {"conversation_id": conversation, "user_id": user, "messages": messages, "final": True}
    )
    lane.flush()


def a_failed_store_job(
    db_url: str, user: str, *, conversation: str = "c-failed", said_at: datetime | None = None
) -> str:
    """A job whose store stage failed: it keeps its extraction for a retry."""
    now = datetime.now(UTC)
    said = (said_at or now).isoformat()
    transcript = {
        "conversation_id": conversation,
        "user_id": user,
        "messages": [
            {"role": "user", "content": FACT, "created_at": said},
            {"role": "assistant", "content": "Ok.", "created_at": said},
        ],
    }
    extraction = {
        "memories": [
            {"content": "User has a pet axolotl named Quetzalcoatl.", "category": "fact",
             "importance": 0.6, "confidence": 1.0},
            {"content": "User loves hiking in Patagonia.", "category": "preference",
             "importance": 0.5, "confidence": 1.0},
        ],
        "episode": {"summary": "The user keeps an axolotl. They love hiking in Patagonia.",
                    "topics": ["axolotl", "Patagonia"], "outcome": None},
    }  # fmt: skip
    with unit_of_work(db_url) as session:
        conversations.save_transcript(session, TranscriptIn.model_validate(transcript), now=now)
        [job_id] = jobs.create_jobs(
            session,
            conversation_id=conversation,
            user_id=user,
            windows=[WindowSpec(0, 1, 0)],
            now=now,
        )
        assert jobs.claim(session, job_id, stage="extract", now=now, stale_after=timedelta(1))
        assert jobs.extracted(
            session, job_id, extraction=extraction, model="stub", tokens_in=None,
            tokens_out=None, cost_usd=None, latency_ms=None, now=now,
        )  # fmt: skip
        assert jobs.claim(session, job_id, stage="store", now=now, stale_after=timedelta(1))
        jobs.fail(session, job_id, error="the embedding API refused", now=now)
    return job_id


def test_a_purged_fact_is_left_only_in_the_raw_messages(
    lane: Memlane, db_url: str, now: datetime
) -> None:
    say(lane, BYSTANDER, "b1", FACT)  # another user's same words stay theirs
    say(lane, OWNER, "c1", FACT, OTHER)
    say(lane, OWNER, "c2", FACT)  # confirmed: c2's episode quotes it too
    failed = a_failed_store_job(db_url, OWNER)
    [memory] = [m for m in lane.list_memories(OWNER) if "axolotl" in m.content.casefold()]
    lane.update_memory(OWNER, memory.id, content=f"{memory.content[:-1]}, a leucistic one.")
    lane.forget(OWNER, memory.id)
    lane.update_memory(OWNER, memory.id, status="active")  # restored: histories grow
    assert "Quetzalcoatl" in lane.assemble(OWNER, "what pet does the user keep?", now=now).text
    lane.assemble(OWNER, "tell me about my axolotl", now=now)  # a query that quotes it
    with Memlane(load_settings(database_url=db_url, working_set_mb=64)) as other_process:
        assert "Quetzalcoatl" in other_process.assemble(OWNER, "pets", now=now).text  # warm
        lane.flush()
        before = grep(db_url, *WORDS, unless=BYSTANDER)
        assert set(before) >= {
            "messages", "memories", "memory_keywords", "memory_keyword_counts", "memory_events",
            "episodes", "jobs", "context_packs",
        }  # fmt: skip

        assert count_line.cache_info().currsize > 0 and stem.cache_info().currsize > 0
        lane.purge(OWNER, memory.id)

        # this process's caches of rendered texts hold nothing of it (nor of anything)
        assert count_line.cache_info().currsize == 0 and stem.cache_info().currsize == 0
        assert grep(db_url, *WORDS, unless=BYSTANDER) == {"messages": before["messages"]}
        assert "Quetzalcoatl" not in other_process.assemble(OWNER, "pets", now=now).text
    # what was not the fact stays: the other memory, the episodes' other sentences
    assert [m.content for m in lane.list_memories(OWNER)] == ["User loves hiking in Patagonia."]
    with unit_of_work(db_url) as session:
        extraction = jobs.load(session, failed).extraction
        summaries = session.scalars(
            text("SELECT summary FROM episodes WHERE user_id = :u"), {"u": OWNER}
        ).all()
    assert extraction is not None
    assert [m["content"] for m in extraction["memories"]] == ["User loves hiking in Patagonia."]
    assert extraction["episode"]["summary"] == f"{MARKER} They love hiking in Patagonia."
    assert summaries and all(MARKER in s for s in summaries)
    # the bystander's copy is whole
    [theirs] = lane.list_memories(BYSTANDER)
    assert "Quetzalcoatl" in theirs.content
    assert grep(db_url, *WORDS)["episodes"] == 1  # theirs


def test_a_purged_fact_said_again_is_neither_learned_nor_summarised(
    lane: Memlane, db_url: str
) -> None:
    say(lane, OWNER, "c1", FACT)
    [memory] = lane.list_memories(OWNER)
    lane.purge(OWNER, memory.id)
    say(lane, OWNER, "c2", FACT, OTHER)  # the store stage suppresses it, and its summary
    assert [m.content for m in lane.list_memories(OWNER)] == ["User loves hiking in Patagonia."]
    assert set(grep(db_url, *WORDS)) == {"messages"}


def _waiting_for_a_lock(conn: Connection) -> bool:
    """Whether a session of this database waits for an advisory lock."""
    return bool(
        conn.scalar(
            text(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            )
        )
    )


@pytest.mark.parametrize("action", ["forget", "purge"])
def test_forget_and_purge_wait_for_the_users_lock(pg: str, action: str) -> None:
    """A store job holds the user's lock while it dedups and confirms: a forget or
    purge beside it waits until the job commits, so the job cannot confirm a memory
    being deleted, and the purge sees what the job saved."""
    with Memlane(load_settings(database_url=pg)) as lane:
        memory = lane.add_memory(OWNER, {"content": "User has a pet axolotl named Quetzalcoatl."})
        engine = get_engine(pg)
        with engine.connect() as job, engine.connect() as watcher:
            job.execute(  # the store stage's lock (store/memories/memories.py)
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": user_lock_key(OWNER)}
            )
            with ThreadPoolExecutor(1) as pool:
                done = pool.submit(getattr(lane, action), OWNER, memory.id)
                deadline = time.monotonic() + 30
                while not _waiting_for_a_lock(watcher) and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert _waiting_for_a_lock(watcher) and not done.done()
                assert lane.get_memory(OWNER, memory.id).status == "active"  # not yet
                job.commit()  # the job's transaction ends: its lock goes
                done.result(timeout=30)
        if action == "forget":
            assert lane.get_memory(OWNER, memory.id).status == "deleted"
        else:
            assert lane.list_memories(OWNER, status=None) == []
