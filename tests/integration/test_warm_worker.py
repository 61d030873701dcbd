"""A fresh worker process pays its imports and model loads at start, not in a job: the
first extraction's latency_ms is of the order of the later ones (the LLM is the stub, a
few milliseconds), where a cold `import litellm` alone costs seconds."""

from __future__ import annotations

import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memlane.config.settings import load_settings
from memlane.service.facade import Memlane
from tests.integration.fleet import WorkerProcess, fleet_env, wait_for_jobs
from tests.llm_stub import LLMStub

pytestmark = pytest.mark.timeout(300)
# Measured on a busy 2-core machine (load 5-7): a cold `import litellm` 3-10 s (printed
# below), a first job that imported it 3,100 ms against 9-10 for the next ones; with the
# import alone paid at start (litellm's first completion builds the rest lazily) 230-360
# ms against 8-30; warmed 47-61 ms against 12-33. So: under 2 s (no import) and of the
# order of the later jobs (at most 4 times their median, or 500 ms: a first connection
# to the LLM is a job's own cost, and a CI machine under load is slower than this one).
NO_IMPORT_MS = 2000.0
SAME_ORDER_MS = 500.0


def transcript(conversation: str) -> dict[str, Any]:
    messages = []
    for i in range(5):
        messages.append({"role": "user", "content": f"Question {i}: I live in Porto."})
        messages.append({"role": "assistant", "content": f"Answer {i}."})
    return {"conversation_id": conversation, "user_id": "warm", "messages": messages}


@pytest.fixture
def stub() -> Iterator[LLMStub]:
    with LLMStub() as running:
        yield running


def cold_import_seconds() -> float:
    """What `import litellm` costs a fresh interpreter here (what a cold job would pay)."""
    code = "import time; t = time.perf_counter(); import litellm; print(time.perf_counter() - t)"
    env = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    return float(done.stdout.strip())


@pytest.mark.parametrize("pool", ["threads", "prefork", "solo"])
def test_the_first_job_of_a_fresh_worker_pays_no_import(
    pg: str, redis_url: str, stub: LLMStub, tmp_path: Path, pool: str
) -> None:
    settings = {"llm_model": "openai/stub-model", "llm_api_base": stub.base_url, "llm_api_key": "x"}
    worker = WorkerProcess(
        fleet_env(pg, redis_url, **settings),
        queues="ingest,extract,store",
        pool=pool,
        concurrency=1,
        log_dir=tmp_path,
    )
    try:
        worker.wait_ready(timeout=120)
        latencies = []
        with Memlane(load_settings(database_url=pg, broker_url=redis_url)) as lane:
            for n in range(4):  # one at a time: each is the only job in the worker
                result = lane.enqueue(transcript(f"warm-{pool}-{n}"))
                assert wait_for_jobs(pg, result.job_ids, timeout=120) == {
                    result.job_ids[0]: "done"
                }, worker.log()
                latency = lane.job(result.job_ids[0]).latency_ms
                assert latency is not None
                latencies.append(latency)
    finally:
        worker.stop()
    cold = cold_import_seconds()
    print(f"pool={pool} latency_ms={latencies} cold import litellm={cold:.2f}s")
    later = statistics.median(latencies[1:])
    assert latencies[0] < NO_IMPORT_MS, (latencies, cold)
    assert latencies[0] <= max(4 * later, SAME_ORDER_MS), latencies
    assert "warmed in" in worker.log_path.read_text(errors="replace")
