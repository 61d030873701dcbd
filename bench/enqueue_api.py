"""POST /v1/transcripts on a warm API: p50 / p99 of one 20-message transcript (10
exchanges: two extraction jobs stored and published), one client on 127.0.0.1 with
keep-alive, and the API process's CPU per request. The API is uvicorn in its own
process on PostgreSQL with Redis as broker; no worker runs (the jobs wait on Redis,
flushed at the end), so the figure is the request's alone.

    python -m bench.enqueue_api                  # 50 warm-up requests, then 500
    python -m bench.enqueue_api --size tiny

Goal (issue 20): p50 <= 15 ms on a warm API.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import (
    REDIS_URL,
    Report,
    env_for_children,
    flush_redis,
    latency_summary,
    parser,
    pg_database,
    truncate,
)
from bench.drills.api_server import api_server
from bench.fleet import cpu_seconds, transcript
from tests.integration.fleet import fleet_env

PLANS: dict[str, dict[str, int]] = {
    "tiny": {"warmup": 5, "requests": 20},
    "full": {"warmup": 50, "requests": 500},
}
USERS = 50


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, help="timed requests (after the warm-up)")
    args = p.parse_args(argv)
    plan = dict(PLANS[args.size])
    if args.requests:
        plan["requests"] = args.requests
    db_url = pg_database("memlane_bench_enqueue")
    truncate(db_url)
    flush_redis(REDIS_URL)
    report = Report("enqueue_api", ["n", "p50_ms", "p99_ms", "api_cpu_ms", "goal", "met"])
    bodies = [
        transcript(f"user{n % USERS}", f"conv-{n}", n, assistant_messages=10)
        for n in range(plan["warmup"] + plan["requests"])
    ]
    with (
        tempfile.TemporaryDirectory() as logs,
        api_server(env_for_children(**fleet_env(db_url, REDIS_URL)), Path(logs)) as api,
        httpx.Client(base_url=api.url, timeout=30) as http,
    ):

        def post(body: dict[str, Any]) -> None:
            response = http.post("/v1/transcripts", json=body)
            if response.status_code not in (200, 202):
                raise RuntimeError(f"{response.status_code}: {response.text[:500]}")

        for body in bodies[: plan["warmup"]]:
            post(body)
        durations: list[float] = []
        cpu_before = cpu_seconds([api.proc.pid])
        for body in bodies[plan["warmup"] :]:
            started = time.perf_counter()
            post(body)
            durations.append(time.perf_counter() - started)
        cpu = cpu_seconds([api.proc.pid]) - cpu_before
    flush_redis(REDIS_URL)
    summary = latency_summary(durations)
    report.emit(**summary, api_cpu_ms=round(cpu * 1000 / len(durations), 2))
    report.emit(goal="p50 <= 15 ms", met=summary["p50_ms"] <= 15)
    report.print_table()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
