"""A stage's claim with its window (one statement on PostgreSQL, two on SQLite): the
same job row and the same messages as `jobs.claim` followed by the conversation's read."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select, update

from memlane.models.db import unit_of_work
from memlane.models.store.conversations import job_windows, jobs
from memlane.models.tables import Message
from tests.integration.test_store_jobs import STALE, seed


def said(url: str) -> dict[int, datetime]:
    with unit_of_work(url) as s:
        rows = s.execute(
            select(Message.seq, Message.created_at).where(Message.conversation_id == "c1")
        )
        return {seq: at for seq, at in rows}


def test_the_extract_claim_reads_the_windows_kept_texts_once(db_url: str, now: datetime) -> None:
    job_id = seed(db_url, now)[0]  # window 0..9 of 12 messages
    with unit_of_work(db_url) as s:  # retention took two texts
        s.execute(
            update(Message)
            .where(Message.conversation_id == "c1", Message.seq.in_([3, 4]))
            .values(purged_at=now, content="")
        )
    with unit_of_work(db_url) as s:
        claimed = job_windows.claim_with_texts(s, job_id, now=now, stale_after=STALE)
    assert claimed is not None
    job, messages = claimed
    assert (job.id, job.status, job.attempts, job.extraction) == (job_id, "running", 1, None)
    assert (job.window_start_seq, job.window_end_seq) == (0, 9)
    assert [m.seq for m in messages] == [0, 1, 2, 5, 6, 7, 8, 9]
    assert [m.content for m in messages] == [f"message number {m.seq}" for m in messages]
    assert [m.role for m in messages[:3]] == ["user", "assistant", "user"]
    assert {m.seq: m.created_at for m in messages} == {
        seq: at for seq, at in said(db_url).items() if seq in {0, 1, 2, 5, 6, 7, 8, 9}
    }
    with unit_of_work(db_url) as s:  # claimed: a redelivery finds nothing to do
        assert job_windows.claim_with_texts(s, job_id, now=now, stale_after=STALE) is None


def test_the_store_claim_reads_the_extraction_and_every_stated_time(
    db_url: str, now: datetime
) -> None:
    job_id = seed(db_url, now)[1]  # window 0..11
    extraction = {"memories": [], "episode": {"summary": "s", "topics": [], "outcome": None}}
    with unit_of_work(db_url) as s:
        assert jobs.claim(s, job_id, stage="extract", now=now, stale_after=STALE)
        assert jobs.extracted(
            s,
            job_id,
            extraction=extraction,
            model="m",
            tokens_in=1,
            tokens_out=1,
            cost_usd=None,
            latency_ms=1.0,
            now=now,
        )
    with unit_of_work(db_url) as s:
        assert job_windows.claim_with_texts(s, job_id, now=now, stale_after=STALE) is None
        claimed = job_windows.claim_with_times(s, job_id, now=now, stale_after=STALE)
    assert claimed is not None
    job, times = claimed
    assert (job.id, job.status, job.attempts, job.extraction) == (job_id, "running", 1, extraction)
    assert times == said(db_url) and sorted(times) == list(range(12))
    later = now + STALE + timedelta(seconds=1)
    with unit_of_work(db_url) as s:  # its worker went stale: claimed again
        again = job_windows.claim_with_times(s, job_id, now=later, stale_after=STALE)
    assert again is not None and again[0].attempts == 2 and again[1] == times


def test_a_window_whose_texts_are_all_gone_is_claimed_empty(db_url: str, now: datetime) -> None:
    job_id = seed(db_url, now)[0]
    with unit_of_work(db_url) as s:
        s.execute(update(Message).values(purged_at=now, content=""))
    with unit_of_work(db_url) as s:
        claimed = job_windows.claim_with_texts(s, job_id, now=now, stale_after=STALE)
    assert claimed is not None and claimed[1] == []
