"""The worker fleet end to end: real Redis, real PostgreSQL + pgvector, real `celery worker`
processes, and the loopback LLM stub that litellm really calls."""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from sqlalchemy import func, select

from memlane.config.settings import load_settings
from memlane.models.db import unit_of_work
from memlane.models.tables import MemoryRow
from memlane.service.facade import Memlane
from tests.integration.fleet import (
    WorkerProcess,
    fleet_env,
    job_statuses,
    memory_count,
    wait_for_jobs,
)
from tests.llm_stub import LLMStub, malformed, status, timeout

pytestmark = pytest.mark.timeout(240)

PREFERS_TS = {
    "content": "User prefers TypeScript for frontend work",
    "category": "preference",
    "importance": 0.8,
    "confidence": 1.0,
}


def transcript(
    conversation: str, user: str, assistant_messages: int, *, final: bool = False, extra: str = ""
) -> dict[str, Any]:
    messages = []
    for i in range(assistant_messages):
        messages.append({"role": "user", "content": f"Question {i} about my project. {extra}"})
        messages.append({"role": "assistant", "content": f"Answer {i}."})
    return {"conversation_id": conversation, "user_id": user, "messages": messages, "final": final}


@pytest.fixture
def stub() -> Iterator[LLMStub]:
    with LLMStub() as running:
        yield running


@pytest.fixture
def fleet(pg: str, redis_url: str, tmp_path: Path):
    """Start worker processes on demand; every one is stopped at the end of the test."""
    started: list[WorkerProcess] = []

    def start(name: str = "w1", *, beat: bool = False, **settings: str) -> WorkerProcess:
        worker = WorkerProcess(
            fleet_env(pg, redis_url, **settings), name=name, log_dir=tmp_path, beat=beat
        )
        started.append(worker)
        worker.wait_ready()
        return worker

    yield start
    for worker in started:
        worker.stop()


def llm_settings(stub: LLMStub, **extra: str) -> dict[str, str]:
    return {
        "llm_model": "openai/stub-model",
        "llm_api_base": stub.base_url,
        "llm_api_key": "x",
        **extra,
    }


def lane_for(pg: str, redis_url: str) -> Memlane:
    return Memlane(load_settings(database_url=pg, broker_url=redis_url))


def test_a_transcript_becomes_memories_through_the_fleet(pg, redis_url, fleet, stub) -> None:
    stub.answer(
        memories=[PREFERS_TS],
        episode={"summary": "Talked about the frontend.", "topics": ["frontend"], "outcome": None},
    )
    fleet(**llm_settings(stub))
    with lane_for(pg, redis_url) as lane:
        result = lane.enqueue(transcript("c1", "u1", 5))
        assert len(result.job_ids) == 1
        assert wait_for_jobs(pg, result.job_ids) == {result.job_ids[0]: "done"}
        job = lane.job(result.job_ids[0])
        memories = lane.list_memories("u1")
    assert [m.content for m in memories] == [PREFERS_TS["content"]]
    assert job.model == "openai/stub-model" and job.tokens_in and job.tokens_out
    assert job.latency_ms is not None and job.attempts == 1
    # the prompt the model got carries the transcript inside its fence
    assert "Question 4 about my project" in str(stub.requests[0]["messages"])


def test_the_offline_extractor_runs_in_the_fleet_without_a_model(pg, redis_url, fleet) -> None:
    fleet()
    with lane_for(pg, redis_url) as lane:
        convo = transcript("c1", "u1", 5, extra="")
        convo["messages"][0]["content"] = "I prefer TypeScript over JavaScript for frontend work."
        result = lane.enqueue(convo)
        wait_for_jobs(pg, result.job_ids)
        assert lane.job(result.job_ids[0]).model == "offline"
        assert any("TypeScript" in m.content for m in lane.list_memories("u1"))


def test_cadence_resend_and_the_final_tail(pg, redis_url, fleet, stub) -> None:
    stub.answer(memories=[PREFERS_TS])
    fleet(**llm_settings(stub))
    with lane_for(pg, redis_url) as lane:
        assert lane.enqueue(transcript("c1", "u1", 4)).job_ids == []  # 4 assistant messages
        first = lane.enqueue(transcript("c1", "u1", 7))  # the 5th is now there
        assert len(first.job_ids) == 1
        again = lane.enqueue(transcript("c1", "u1", 7))  # re-sent: nothing new
        assert (again.job_ids, again.stored_messages) == ([], 0)
        tail = lane.enqueue(transcript("c1", "u1", 7, final=True))  # 4 messages after it
        assert len(tail.job_ids) == 1
        wait_for_jobs(pg, first.job_ids + tail.job_ids)
        jobs = sorted(
            (j.window_start_seq, j.window_end_seq, j.new_from_seq) for j in lane.jobs(user_id="u1")
        )
    assert jobs == [(0, 9, 0), (0, 13, 10)]
    # the tail re-read the same stub answer from new messages: one memory, seen twice
    assert memory_count(pg, "u1") == 1


def test_a_redelivered_or_repeated_job_stores_nothing_twice(pg, redis_url, fleet, stub) -> None:
    stub.answer(memories=[PREFERS_TS])
    fleet(**llm_settings(stub))
    from memlane.workers import tasks

    with lane_for(pg, redis_url) as lane:
        job_id = lane.enqueue(transcript("c1", "u1", 5)).job_ids[0]
        wait_for_jobs(pg, [job_id])
        before = [(m.id, m.access_count) for m in lane.list_memories("u1")]
        tasks.extract.apply_async((job_id,))  # the broker delivers the same ids again
        tasks.store.apply_async((job_id,))
        wait_for_jobs(pg, [job_id])
        time.sleep(1.0)  # give the duplicates time to run (they must be no-ops)
        after = [(m.id, m.access_count) for m in lane.list_memories("u1")]
        assert after == before
        assert lane.job(job_id).attempts == 1
        assert len(stub.requests) == 1


def test_two_workers_storing_one_fact_for_one_user_leave_one_memory(
    pg, redis_url, fleet, stub
) -> None:
    stub.answer(memories=[PREFERS_TS])
    fleet("w1", **llm_settings(stub))
    fleet("w2", **llm_settings(stub))
    with lane_for(pg, redis_url) as lane:
        ids = []
        for n in range(6):  # six conversations state the same fact at once
            ids += lane.enqueue(transcript(f"c{n}", "u1", 5)).job_ids
        assert set(wait_for_jobs(pg, ids).values()) == {"done"}
        memories = lane.list_memories("u1")
    assert [(m.content, m.access_count) for m in memories] == [(PREFERS_TS["content"], 6)]


@pytest.mark.parametrize(
    ("failure", "settings"),
    [
        (status(500), {}),
        (status(429, retry_after=1), {}),
        (timeout(6), {"llm_timeout_s": "2"}),
        (malformed("Sure! Here are the memories you asked for."), {}),
    ],
    ids=["500", "429", "timeout", "malformed"],
)
def test_a_failing_llm_call_is_retried_and_then_done(
    pg, redis_url, fleet, stub, failure, settings
) -> None:
    stub.answer(memories=[PREFERS_TS])
    stub.script([failure])
    fleet(**llm_settings(stub, **settings))
    with lane_for(pg, redis_url) as lane:
        job_id = lane.enqueue(transcript("c1", "u1", 5)).job_ids[0]
        assert wait_for_jobs(pg, [job_id], timeout=90) == {job_id: "done"}
    assert len(stub.requests) == 2  # one failure, one retry
    assert memory_count(pg, "u1") == 1


def test_a_job_out_of_retries_is_failed_with_its_reason_and_retryable(
    pg, redis_url, fleet, stub
) -> None:
    stub.script([malformed("no JSON here, sorry")] * 3)
    stub.answer(memories=[PREFERS_TS])
    fleet(**llm_settings(stub))
    with lane_for(pg, redis_url) as lane:
        job_id = lane.enqueue(transcript("c1", "u1", 5)).job_ids[0]
        assert wait_for_jobs(pg, [job_id], timeout=90) == {job_id: "failed"}
        failed = lane.job(job_id)
        assert failed.attempts == 3 == len(stub.requests)
        assert failed.last_error and "ExtractionError" in failed.last_error
        assert "no JSON here, sorry" in failed.last_error  # the raw answer is kept
        lane.retry_job(job_id)
        assert wait_for_jobs(pg, [job_id], timeout=60) == {job_id: "done"}
    assert memory_count(pg, "u1") == 1


def test_a_permanent_refusal_fails_at_once(pg, redis_url, fleet, stub) -> None:
    stub.script([status(401)])
    fleet(**llm_settings(stub))
    with lane_for(pg, redis_url) as lane:
        job_id = lane.enqueue(transcript("c1", "u1", 5)).job_ids[0]
        assert wait_for_jobs(pg, [job_id]) == {job_id: "failed"}
        assert lane.job(job_id).attempts == 1


def test_a_worker_killed_mid_task_loses_nothing(pg, redis_url, fleet, stub) -> None:
    stub.delay_s = 1.5  # every answer is slow, so the kill lands mid-call
    fast = {"stuck_after_s": "4", "sweep_every_s": "1"}
    first = fleet("w1", **llm_settings(stub, **fast))
    with lane_for(pg, redis_url) as lane:
        ids = []
        for n in range(8):
            stub.answer(memories=[{**PREFERS_TS, "content": f"User owns project number {n}"}])
            ids += lane.enqueue(transcript(f"c{n}", f"u{n % 3}", 5)).job_ids
        deadline = time.monotonic() + 30
        while "running" not in job_statuses(pg, ids).values():
            assert time.monotonic() < deadline, "no job started"
            time.sleep(0.05)
        first.kill()
        # A new worker with beat: the sweep republishes what the dead one held.
        second = fleet("w2", beat=True, **llm_settings(stub, **fast))
        statuses = wait_for_jobs(pg, ids, timeout=120)
        assert second.proc.poll() is None
    assert set(statuses.values()) == {"done"}
    with unit_of_work(pg) as s:
        duplicates = s.execute(
            select(MemoryRow.user_id, MemoryRow.content, func.count())
            .group_by(MemoryRow.user_id, MemoryRow.content)
            .having(func.count() > 1)
        ).all()
    assert duplicates == []


def test_redis_never_sees_transcript_text(pg, redis_url, fleet, stub, tmp_path) -> None:
    canary = f"CANARY{uuid.uuid4().hex}"
    stub.answer(memories=[{**PREFERS_TS, "content": f"User's codename is {canary}"}])
    client = redis.Redis.from_url(redis_url)
    # MONITOR streams every command any client sends to this Redis server.
    traffic = tmp_path / "redis-monitor.log"
    where = client.connection_pool.connection_kwargs
    with traffic.open("wb") as sink:
        monitor = subprocess.Popen(
            ["redis-cli", "-h", str(where["host"]), "-p", str(where["port"]), "MONITOR"],
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    fleet(**llm_settings(stub))
    with lane_for(pg, redis_url) as lane:
        convo = transcript("c1", "u1", 5)
        convo["messages"][0]["content"] = f"My codename is {canary}, keep it secret."
        job_ids = lane.enqueue(convo).job_ids
        wait_for_jobs(pg, job_ids)
        lane.assemble("u1", f"what is {canary}?", budget_tokens=500)
        lane.flush()
    time.sleep(0.5)
    monitor.terminate()
    monitor.wait(timeout=10)
    seen = traffic.read_text(errors="replace")
    assert "memlane.extract" in seen and "memlane.store" in seen, seen[:2000]
    assert canary not in seen
    for key in client.scan_iter():
        assert canary.encode() not in key
        kind = client.type(key)
        if kind == b"string":
            assert canary.encode() not in (client.get(key) or b"")
        elif kind == b"list":
            assert not any(canary.encode() in v for v in client.lrange(key, 0, -1))
        elif kind == b"hash":
            assert not any(canary.encode() in v for v in client.hgetall(key).values())
    # ...while the memory itself did reach the store
    assert any(
        canary in m.content for m in Memlane(load_settings(database_url=pg)).list_memories("u1")
    )


def _memory(content: str) -> dict[str, Any]:
    return {"content": content, "category": "preference", "importance": 0.8, "confidence": 1.0}


def test_a_german_and_a_japanese_conversation_end_as_memories_with_their_language(
    pg, redis_url, fleet, stub
) -> None:
    fleet(**llm_settings(stub))
    with lane_for(pg, redis_url) as lane:
        # German: one fact said twice (word order changed) is one memory
        stub.answer(
            memories=[
                _memory("Der Nutzer trinkt jeden Morgen grünen Tee"),
                _memory("Jeden Morgen trinkt der Nutzer grünen Tee"),
            ]
        )
        german = transcript("c-de", "u-de", 5, extra="Ich trinke jeden Morgen grünen Tee.")
        wait_for_jobs(pg, lane.enqueue(german).job_ids)
        # Japanese: a liking, then its opposite in a later conversation supersedes it
        stub.answer(memories=[_memory("ユーザーはコーヒーが好きです")])
        first = transcript("c-ja1", "u-ja", 5, extra="私はコーヒーが好きです。")
        wait_for_jobs(pg, lane.enqueue(first).job_ids)
        stub.answer(memories=[_memory("ユーザーはコーヒーが嫌いです")])
        second = transcript("c-ja2", "u-ja", 5, extra="今はコーヒーが嫌いです。")
        wait_for_jobs(pg, lane.enqueue(second).job_ids)
        germans = lane.list_memories("u-de")
        japanese = lane.list_memories("u-ja", status=None)
    assert [(m.content, m.language) for m in germans] == [
        ("Der Nutzer trinkt jeden Morgen grünen Tee", "de")
    ]
    assert sorted((m.content, m.status, m.language) for m in japanese) == [
        ("ユーザーはコーヒーが好きです", "superseded", "ja"),
        ("ユーザーはコーヒーが嫌いです", "active", "ja"),
    ]
