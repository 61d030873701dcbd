"""The API-driving drills at a tiny size, so they keep working: each runs as a process
of its own (as an operator runs it) and must pass its own checks. Their figures are the
full runs' (docs/performance.md); the PostgreSQL drill's outage here is
one database refusing connections for a second (bench.drills.db_outage), never a
restart of the server the other tests share."""

from __future__ import annotations

import json
import os
import sys

import pytest

from bench.common import DB_SUFFIX
from tests.integration.fleet import run_bench

pytestmark = pytest.mark.timeout(300)

ARGS = {
    # answers slow enough that jobs are still running when the database goes away, even
    # when a loaded machine is slow to start the outage (at 1 s, a CI run found none);
    # twice the extract worker's 8 threads, so a second wave runs at the 30% mark (with
    # 8 jobs all ended together and a loaded run found none running)
    "database_outage": [
        "--users", "2", "--per-user", "8", "--outage", "3", "--llm-delay", "5",
        "--resume-within", "30",
    ],
    "pg_restart": [
        "--users", "2", "--per-user", "2", "--pace", "0.05", "--settle", "0.5",
        "--restart-command",
        f"{sys.executable} -m bench.drills.db_outage memlane_drill{DB_SUFFIX} 1",
    ],
    "sustained_load": [
        "--requests", "300", "--baseline", "100", "--users", "3", "--clients", "4",
        "--max-growth", "0.5",
    ],
    "slow_consumer": [
        "--delay", "3", "--timeout", "1", "--retries", "1", "--users", "1", "--per-user", "1",
    ],
}  # fmt: skip


@pytest.mark.parametrize("drill", sorted(ARGS))
def test_the_drill_passes_at_a_tiny_size(drill: str, redis_url: str) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("MEMLANE_") or k.startswith("MEMLANE_BENCH_")
    }
    # they must keep working, whatever the embedder: the lexical one loads no model in
    # every process it starts (minilm's costs are measured in the README)
    env["MEMLANE_EMBEDDING_MODEL"] = "hashing"
    env["MEMLANE_BENCH_REDIS_URL"] = redis_url  # this checkout's Redis database
    done = run_bench([f"bench.drills.{drill}", *ARGS[drill]], env=env, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    checks = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert checks and all(row["bench"] == f"drill {drill}" for row in checks)
    assert all(row["ok"] is not False for row in checks)
    assert f"drill {drill}: PASSED" in done.stdout
