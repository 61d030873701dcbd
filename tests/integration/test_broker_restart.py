"""A Redis restart while a task runs: the worker that held it stays up, and the job ends
done. The broker is a redis-server of the test's own, without persistence, so a restart
forgets every message, as the redis_restart drill's does."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from bench.drills.redis_restart import RedisServer
from memlane.config.settings import load_settings
from memlane.service.facade import Memlane
from tests.integration.fleet import WorkerProcess, fleet_env, job_statuses, wait_for_jobs
from tests.integration.test_fleet import PREFERS_TS, llm_settings, transcript
from tests.llm_stub import LLMStub

pytestmark = pytest.mark.timeout(240)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# Both of the Procfile's pools: threads (the extract queue's), its LLM call outlasting the
# outage, and prefork (the store queue's), its task ending while the broker is away.
@pytest.mark.parametrize(
    ("pool", "call_s", "outage_s"),
    [("threads", 6.0, 1.0), ("prefork", 1.0, 4.0)],
    ids=["threads-ends-after", "prefork-ends-during"],
)
def test_a_redis_restart_mid_task_leaves_the_worker_up_and_loses_no_job(
    pg: str, tmp_path: Path, pool: str, call_s: float, outage_s: float
) -> None:
    server = RedisServer(free_port(), tmp_path)
    server.start()
    worker = None
    try:
        with LLMStub() as stub:
            stub.delay_s = call_s
            stub.answer(memories=[{**PREFERS_TS, "content": "User keeps bees on the roof"}])
            settings = llm_settings(stub, stuck_after_s="4", sweep_every_s="1")
            env = fleet_env(pg, server.url, **settings)
            worker = WorkerProcess(env, pool=pool, concurrency=1, log_dir=tmp_path, beat=True)
            worker.wait_ready()
            lane = Memlane(load_settings(database_url=pg, broker_url=server.url))
            with lane:
                ids = lane.enqueue(transcript("c1", "u1", 5, final=True)).job_ids
                deadline = time.monotonic() + 60
                while not stub.requests:
                    assert time.monotonic() < deadline, f"no LLM call:\n{worker.log()}"
                    time.sleep(0.05)
                server.shutdown()
                time.sleep(outage_s)
                server.start()
                time.sleep(call_s + 2)
                assert worker.proc.poll() is None, f"the worker exited:\n{worker.log()}"
                statuses = wait_for_jobs(pg, ids, timeout=120)
                assert worker.proc.poll() is None, f"the worker exited:\n{worker.log()}"
        assert set(statuses.values()) == {"done"}, job_statuses(pg, ids)
    finally:
        if worker is not None:
            worker.stop()
        server.shutdown()
