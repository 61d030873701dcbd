from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from memlane.models.db import unit_of_work
from memlane.models.store.conversations import jobs
from memlane.models.store.conversations import messages as conversations
from memlane.pipeline.errors import MemlaneError
from memlane.pipeline.extraction.cadence import WindowSpec
from tests.integration.test_store_conversations import transcript

STALE = timedelta(minutes=10)


def seed(url: str, now: datetime) -> list[str]:
    with unit_of_work(url) as s:
        conversations.save_transcript(s, transcript(12), now=now)
        return jobs.create_jobs(
            s,
            conversation_id="c1",
            user_id="u1",
            windows=[WindowSpec(0, 9, 0), WindowSpec(0, 11, 10)],
            now=now,
        )


def test_jobs_are_created_once_per_window(db_url: str, now: datetime) -> None:
    created = seed(db_url, now)
    assert len(created) == 2
    with unit_of_work(db_url) as s:
        again = jobs.create_jobs(
            s, conversation_id="c1", user_id="u1", windows=[WindowSpec(0, 9, 0)], now=now
        )
        conv = conversations.get_conversation(s, "c1")
        assert conv is not None and conv.extracted_to_seq == 11
    assert again == []
    assert created[0] == jobs.job_id_for("c1", 9)


def test_a_job_is_claimed_once_and_again_only_when_its_worker_went_stale(
    db_url: str, now: datetime
) -> None:
    job_id = seed(db_url, now)[0]
    with unit_of_work(db_url) as s:
        first = jobs.claim(s, job_id, stage="extract", now=now, stale_after=STALE)
        assert first is not None and first.attempts == 1 and first.status == "running"
    with unit_of_work(db_url) as s:
        assert jobs.claim(s, job_id, stage="extract", now=now, stale_after=STALE) is None
        assert jobs.claim(s, job_id, stage="store", now=now, stale_after=STALE) is None
    later = now + STALE + timedelta(seconds=1)
    with unit_of_work(db_url) as s:
        again = jobs.claim(s, job_id, stage="extract", now=later, stale_after=STALE)
        assert again is not None and again.attempts == 2


def test_stage_handover_done_and_redelivery_is_a_no_op(db_url: str, now: datetime) -> None:
    job_id = seed(db_url, now)[0]
    with unit_of_work(db_url) as s:
        job = jobs.claim(s, job_id, stage="extract", now=now, stale_after=STALE)
        assert job is not None
        assert jobs.extracted(
            s,
            job_id,
            extraction={"memories": []},
            model="offline",
            tokens_in=10,
            tokens_out=5,
            cost_usd=None,
            latency_ms=1.5,
            now=now,
        )
    with unit_of_work(db_url) as s:
        # a second extract worker's result is not written over the handed-over job
        assert not jobs.extracted(
            s,
            job_id,
            extraction={"memories": [{"content": "late"}]},
            model="other",
            tokens_in=1,
            tokens_out=1,
            cost_usd=None,
            latency_ms=1.0,
            now=now,
        )
        assert jobs.claim(s, job_id, stage="extract", now=now, stale_after=STALE) is None
        job = jobs.claim(s, job_id, stage="store", now=now, stale_after=STALE)
        assert job is not None and job.extraction == {"memories": []}
        jobs.done(s, job.id, now=now)
    with unit_of_work(db_url) as s:
        assert jobs.claim(s, job_id, stage="store", now=now, stale_after=STALE) is None
        public = jobs.to_public(jobs.load(s, job_id))
    assert (public.status, public.stage, public.tokens_in, public.model) == (
        "done",
        "store",
        10,
        "offline",
    )


def test_failed_jobs_keep_their_reason_and_can_be_retried(db_url: str, now: datetime) -> None:
    job_id = seed(db_url, now)[0]
    with unit_of_work(db_url) as s:
        jobs.fail(s, job_id, error="ExtractionError: not JSON", now=now)
    with unit_of_work(db_url) as s:
        failed = jobs.to_public(jobs.load(s, job_id))
        assert failed.status == "failed" and failed.last_error == "ExtractionError: not JSON"
        jobs.retry(s, job_id, now=now, stuck_after=timedelta(minutes=10))
    with unit_of_work(db_url) as s:
        assert jobs.claim(s, job_id, stage="extract", now=now, stale_after=STALE) is not None
    with pytest.raises(MemlaneError, match="only a failed job"), unit_of_work(db_url) as s:
        jobs.retry(s, job_id, now=now, stuck_after=timedelta(minutes=10))


def test_stuck_jobs_are_found_by_age(db_url: str, now: datetime) -> None:
    ids = seed(db_url, now)
    with unit_of_work(db_url) as s:
        jobs.touch(s, ids[1:], now=now + timedelta(hours=1))
    with unit_of_work(db_url) as s:
        stuck = jobs.stuck(s, older_than=now + timedelta(minutes=30))
    assert [j.id for j in stuck] == ids[:1]
