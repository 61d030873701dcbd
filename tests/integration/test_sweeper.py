from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from memlane.config.settings import load_settings
from memlane.models.db import unit_of_work
from memlane.models.store.conversations import jobs
from memlane.models.store.conversations import messages as conversations
from memlane.models.store.memories import memories
from memlane.pipeline.extraction.cadence import WindowSpec
from memlane.workers import sweeper
from tests.integration.test_store_conversations import transcript
from tests.integration.test_store_memories import add


def test_an_idle_conversation_gets_its_tail_extracted_once(db_url: str, now: datetime) -> None:
    settings = load_settings(database_url=db_url, idle_after_s=600)
    with unit_of_work(db_url) as s:
        conversations.save_transcript(s, transcript(6), now=now)  # 3 assistant messages
    assert sweeper.sweep(settings, now=now + timedelta(minutes=5)).extract == []  # not idle yet
    result = sweeper.sweep(settings, now=now + timedelta(minutes=11))
    assert result.tails == 1 and len(result.extract) == 1
    with unit_of_work(db_url) as s:
        job = jobs.to_public(jobs.load(s, result.extract[0]))
    assert (job.window_start_seq, job.window_end_seq, job.new_from_seq) == (0, 5, 0)
    again = sweeper.sweep(settings, now=now + timedelta(minutes=12))
    assert again.tails == 0


def test_a_stuck_job_is_released_and_republished(db_url: str, now: datetime) -> None:
    settings = load_settings(database_url=db_url, stuck_after_s=600, idle_after_s=10**6)
    with unit_of_work(db_url) as s:
        conversations.save_transcript(s, transcript(10), now=now)
        [job_id] = jobs.create_jobs(
            s, conversation_id="c1", user_id="u1", windows=[WindowSpec(0, 9, 0)], now=now
        )
        jobs.claim(s, job_id, stage="extract", now=now, stale_after=timedelta(minutes=10))
    later = now + timedelta(minutes=11)
    result = sweeper.sweep(settings, now=later)
    assert result.extract == [job_id]
    with unit_of_work(db_url) as s:
        # queued again with a fresh clock: the republished message can claim it at once
        claimed = jobs.claim(
            s, job_id, stage="extract", now=later, stale_after=timedelta(minutes=10)
        )
        assert claimed is not None and claimed.attempts == 2
    assert sweeper.sweep(settings, now=later + timedelta(minutes=1)).extract == []


def test_moving_accessed_at_forward_takes_a_batch_with_one_moment_per_id(
    db_url: str, now: datetime
) -> None:
    settings = load_settings(database_url=db_url)
    a = add(db_url, now, "Prefers TypeScript.")
    b = add(db_url, now, "Deploys on Fridays.")
    c = add(db_url, now, "Lives in Lisbon.")
    later, latest = now + timedelta(hours=1), now + timedelta(hours=2)
    moved = sweeper.move_accessed_at_forward(
        [a.id, b.id, c.id],
        [later.isoformat(), latest.isoformat(), (now - timedelta(hours=1)).isoformat()],
        settings,
    )
    assert moved == 2  # c's moment is older than its accessed_at: it never moves back
    with unit_of_work(db_url) as s:
        got = {m: memories.get(s, "u1", m).accessed_at for m in (a.id, b.id, c.id)}
    assert got == {a.id: later, b.id: latest, c.id: now}
    # the single form, as messages published before the batch form still carry it
    assert sweeper.move_accessed_at_forward([a.id, b.id], latest.isoformat(), settings) == 1
    with pytest.raises(ValueError, match="2 memory ids but 1 access times"):
        sweeper.move_accessed_at_forward([a.id, b.id], [latest.isoformat()], settings)
