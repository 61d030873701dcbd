"""Redis killed while tasks are in flight, unacknowledged: the worker process stays up
(memlane.workers.app.OutageSafeConsumer) and every job ends done. The broker is a
redis-server of the test's own; it is SIGKILLed, so it forgets every message, and
comes back empty."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from bench.drills.redis_restart import RedisServer
from memlane.config.settings import load_settings
from memlane.service.facade import Memlane
from tests.integration.fleet import WorkerProcess, fleet_env, job_statuses, wait_for_jobs
from tests.integration.test_broker_restart import free_port
from tests.integration.test_fleet import llm_settings, transcript
from tests.llm_stub import LLMStub

pytestmark = pytest.mark.timeout(150)

KILLS = 5
IN_FLIGHT = 32  # the Procfile's extract threads; with fewer the race is rarer


def kill(server: RedisServer) -> None:
    assert server.proc is not None
    os.kill(server.proc.pid, signal.SIGKILL)
    server.proc.wait(timeout=10)
    server.proc = None


def test_redis_killed_under_unacknowledged_tasks_leaves_the_worker_up(
    pg: str, tmp_path: Path
) -> None:
    server = RedisServer(free_port(), tmp_path)
    server.start()
    worker = None
    try:
        with LLMStub() as stub:
            stub.delay_s = 3.0  # every task waits on the model when Redis dies
            stub.answer(memories=[])
            settings = llm_settings(stub, stuck_after_s="5", sweep_every_s="1")
            worker = WorkerProcess(
                fleet_env(pg, server.url, **settings),
                pool="threads",
                concurrency=IN_FLIGHT,
                log_dir=tmp_path,
                beat=True,
            )
            worker.wait_ready()
            ids: list[str] = []
            with Memlane(load_settings(database_url=pg, broker_url=server.url)) as lane:
                for round_ in range(KILLS):
                    calls = len(stub.requests)
                    for n in range(IN_FLIGHT):
                        conversation = f"c{round_}-{n}"
                        ids += lane.enqueue(transcript(conversation, "u1", 5, final=True)).job_ids
                    deadline = time.monotonic() + 30
                    while len(stub.requests) < calls + IN_FLIGHT // 2:
                        assert time.monotonic() < deadline, f"no LLM calls:\n{worker.log()}"
                        time.sleep(0.02)
                    kill(server)
                    time.sleep(1.0)
                    server.start()
                    time.sleep(3.0)  # the consumer reconnects (or gives up) meanwhile
                    assert worker.proc.poll() is None, f"the worker exited:\n{worker.log()}"
            statuses = wait_for_jobs(pg, ids, timeout=90)
            assert worker.proc.poll() is None, f"the worker exited:\n{worker.log()}"
        assert set(statuses.values()) == {"done"}, job_statuses(pg, ids)
    finally:
        if worker is not None:
            worker.stop()
        server.shutdown()
