"""A database outage while an extraction waits on the model: once the database is back,
the job runs again and ends done, without waiting for the stuck sweep (left here at
production's 600 s). The outage refuses connections to the test's own database and
terminates its sessions (bench.drills.db_outage), never a restart of the shared server."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from bench.drills.db_outage import outage
from bench.drills.redis_restart import RedisServer
from memlane.config.settings import load_settings
from memlane.service.facade import Memlane
from tests.integration.fleet import WorkerProcess, fleet_env, job_statuses
from tests.integration.test_broker_restart import free_port
from tests.integration.test_fleet import PREFERS_TS, llm_settings, transcript
from tests.llm_stub import LLMStub

pytestmark = pytest.mark.timeout(120)

OUTAGE_S = 4.0


@pytest.mark.parametrize("pool", ["threads", "prefork"])
def test_a_job_held_through_a_database_outage_runs_again_once_it_is_back(
    pg: str, tmp_path: Path, pool: str
) -> None:
    server = RedisServer(free_port(), tmp_path)
    server.start()
    worker = None
    try:
        with LLMStub() as stub:
            stub.delay_s = 2.0  # the answer comes while the database is away
            stub.answer(memories=[{**PREFERS_TS, "content": "User keeps bees on the roof"}])
            settings = llm_settings(stub, stuck_after_s="600", sweep_every_s="1")
            worker = WorkerProcess(
                fleet_env(pg, server.url, **settings),
                pool=pool,
                concurrency=2,
                log_dir=tmp_path,
                beat=True,
            )
            worker.wait_ready()
            with Memlane(load_settings(database_url=pg, broker_url=server.url)) as lane:
                ids = lane.enqueue(transcript("c1", "u1", 5, final=True)).job_ids
            deadline = time.monotonic() + 60
            while not stub.requests:
                assert time.monotonic() < deadline, f"no LLM call:\n{worker.log()}"
                time.sleep(0.05)
            assert set(job_statuses(pg, ids).values()) == {"running"}
            outage(str(make_url(pg).database), OUTAGE_S)
            deadline = time.monotonic() + 30  # the stuck sweep would take 600 s
            while (statuses := job_statuses(pg, ids)) and set(statuses.values()) != {"done"}:
                assert time.monotonic() < deadline, f"{statuses}\n{worker.log()}"
                time.sleep(0.2)
            assert worker.proc.poll() is None, worker.log()
        assert len(stub.requests) >= 2  # the model was asked again after the outage
    finally:
        if worker is not None:
            worker.stop()
        server.shutdown()


def test_the_embedded_worker_runs_a_job_held_through_an_outage_again(pg: str) -> None:
    """The in-process worker (no broker) retries a stage that lost the database with its
    claim, as the Celery tasks do; it used to log the error and leave the job `running`
    until the stuck sweep of the next process to start."""
    with LLMStub() as stub:
        stub.delay_s = 2.0
        stub.answer(memories=[{**PREFERS_TS, "content": "User keeps bees on the roof"}])
        settings = load_settings(database_url=pg, stuck_after_s=600, **llm_settings(stub))
        with Memlane(settings) as lane:
            ids = lane.enqueue(transcript("c1", "u1", 5, final=True)).job_ids
            deadline = time.monotonic() + 60
            while not stub.requests:
                assert time.monotonic() < deadline, "no LLM call"
                time.sleep(0.05)
            assert set(job_statuses(pg, ids).values()) == {"running"}
            outage(str(make_url(pg).database), OUTAGE_S)
            assert lane.wait(ids, timeout=30) == dict.fromkeys(ids, "done")
            assert any("bees" in m.content for m in lane.list_memories("u1"))
        assert len(stub.requests) >= 2  # the model was asked again after the outage
