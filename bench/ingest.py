"""Ingest throughput, end to end: transcripts enqueued through the facade, job ids on
Redis, real Celery workers (extract: thread pool of N; ingest + store: prefork 2, as the
Procfile runs them) on PostgreSQL, litellm calling the loopback LLM stub in its own
process, answering at once or after 1 s. Also each worker's peak RSS.

    python -m bench.ingest                     # delays 0 and 1 s x concurrency 1, 8, 32
    python -m bench.ingest --size tiny
    python -m bench.ingest --delays 0 --concurrency 32 --transcripts 2000
    python -m bench.ingest --delays 0 --concurrency 32 --cpu-accounting

A transcript is 5 user/assistant exchanges (one extraction job), each answer 3 memories.
Throughput = transcripts / (last job finished - first enqueue). Goals on this machine:
>= 50 transcripts/s with the instant stub; with the 1 s stub, throughput grows with the
extract pool's concurrency. With --cpu-accounting, a second table: the whole machine's
CPU during each run, ms per transcript by process kind (each worker's main thread apart
from its pool, the bench's enqueue apart from its polling, Redis, PostgreSQL, the stub),
PostgreSQL's other processes, every other live process (other sessions' work),
interrupts, and processes that exited meanwhile.
"""

from __future__ import annotations

import itertools
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import make_url

from bench.common import (
    REDIS_URL,
    Report,
    flush_redis,
    parser,
    pg_database,
    truncate,
)
from bench.fleet import (
    active_memories,
    cpu_by_kind,
    cpu_used_between,
    live_cpu,
    running_fleet,
    transcript,
    wait_all_finished,
)
from bench.stub import stub_process
from memlane.config.settings import load_settings
from memlane.models.db import unit_of_work
from memlane.models.tables import Job
from memlane.service.facade import Memlane

PLANS: dict[str, dict[str, Any]] = {
    "tiny": {
        "delays": [0.0],
        "concurrency": [4],
        "transcripts": 10,
        "db": "memlane_bench_ingest_tiny",
    },
    "full": {
        "delays": [0.0, 1.0],
        "concurrency": [1, 8, 32],
        "transcripts": 1000,
        "db": "memlane_bench_ingest",
    },
}
USERS = 50


def transcripts_for(delay: float, concurrency: int, plan: dict[str, Any]) -> int:
    """Enough for ~12 s of steady state when every call waits `delay` seconds."""
    if delay <= 0:
        return int(plan["transcripts"])
    return max(12, min(int(plan["transcripts"]), int(12 * concurrency / delay)))


def enqueue_all(lane: Memlane, count: int, seed: int, threads: int = 4) -> float:
    """Enqueue `count` transcripts from a few threads (chat app servers); returns the
    wall-clock seconds it took."""
    items = [
        transcript(f"user{n % USERS}", f"conv-{seed}-{n}", seed * 100_000 + n) for n in range(count)
    ]
    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        for result in pool.map(lane.enqueue, items):
            assert len(result.job_ids) == 1
    return time.perf_counter() - started


def last_finished(db_url: str) -> datetime:
    with unit_of_work(db_url) as session:
        moment = session.scalar(select(func.max(Job.finished_at)))
    assert isinstance(moment, datetime)
    return moment


KINDS = (
    "enqueue",
    "bench_poll",
    "extract_main",
    "extract_pool",
    "store_main",
    "store_pool",
    "redis",
    "postgres",
    "stub",
    "measured",
    "postgres_other",
    "other_live",
    "irq",
    "exited",
    "machine",
)


def run_cell(
    report: Report,
    db_url: str,
    delay: float,
    concurrency: int,
    plan: dict[str, Any],
    accounting: Report | None = None,
) -> None:
    count = transcripts_for(delay, concurrency, plan)
    truncate(db_url)
    flush_redis()
    with tempfile.TemporaryDirectory() as logs, stub_process(delay) as (base_url, stub_pid):
        settings = {"llm_model": "openai/stub-model", "llm_api_base": base_url, "llm_api_key": "x"}
        with running_fleet(
            db_url, REDIS_URL, Path(logs), settings=settings, extract_concurrency=concurrency
        ) as fleet:
            lane = Memlane(load_settings(database_url=db_url, broker_url=REDIS_URL))
            database = make_url(db_url).database or ""
            roles = {"enqueue": os.getpid(), "stub": stub_pid}
            cpu_before = cpu_by_kind(fleet, database, **roles)
            live_before = live_cpu()
            started = datetime.now(UTC)
            enqueue_s = enqueue_all(lane, count, seed=int(delay * 1000) + concurrency)
            enqueued_cpu = time.process_time()
            counts = wait_all_finished(db_url, count, timeout=120 + count * max(delay, 0.05) * 2)
            elapsed = (last_finished(db_url) - started).total_seconds()
            cpu_after = cpu_by_kind(fleet, database, **roles)
            live_s = cpu_used_between(live_before, live_cpu())
            polling_cpu = time.process_time() - enqueued_cpu
            rss = fleet.peak_rss_mib()
            lane.close()
    # Where the machine's CPU went, per transcript: the profile of a CPU-bound run.
    spent = {k: (cpu_after[k] - cpu_before[k]) * 1000 / count for k in cpu_after}
    spent["all_live"] = live_s * 1000 / count
    cpu = {
        f"cpu_ms_{role}": round(ms, 1)
        for role, ms in spent.items()
        if role in ("enqueue", "extract", "store", "postgres", "redis", "stub")
    }
    if accounting is not None:
        accounting.emit(
            stub_delay_s=delay,
            extract_concurrency=concurrency,
            transcripts_per_s=round(count / elapsed, 1),
            **account(spent, polling_cpu * 1000 / count, count / elapsed),
        )
    report.emit(
        stub_delay_s=delay,
        extract_concurrency=concurrency,
        transcripts=count,
        done=counts.get("done", 0),
        failed=counts.get("failed", 0),
        seconds=round(elapsed, 2),
        transcripts_per_s=round(count / elapsed, 1),
        enqueue_per_s=round(count / enqueue_s, 1),
        memories=active_memories(db_url),
        **rss,
        **cpu,
    )


def account(spent: dict[str, float], polling_ms: float, rate: float) -> dict[str, float]:
    """The machine's CPU ms per transcript by kind. The bench's own process is split
    at the end of enqueuing: what it used afterwards is its polling of the jobs table
    (enqueue threads still finishing are negligible by then). `busy_cores` is the
    machine's CPU per wall second during the run: ~2 on two cores means CPU-bound."""
    kinds = {
        "enqueue": spent["enqueue"] - polling_ms,
        "bench_poll": polling_ms,
        **{k: spent[k] for k in ("extract_main", "extract_pool", "store_main", "store_pool")},
        **{k: spent[k] for k in ("redis", "stub")},
        "postgres": spent["postgres_ours"],
    }
    kinds["measured"] = sum(kinds.values())
    kinds["postgres_other"] = spent["postgres_other"]
    # every live process less ours and PostgreSQL's other processes
    kinds["other_live"] = spent["all_live"] - kinds["measured"] - spent["postgres_other"]
    kinds["irq"] = spent["irq"]
    # processes that exited meanwhile (their time in the run; others' short-lived tools)
    kinds["exited"] = spent["machine"] - spent["all_live"] - spent["irq"]
    kinds["machine"] = spent["machine"]
    out = {f"ms_{k}": round(v, 1) for k, v in kinds.items()}
    out["busy_cores"] = round(spent["machine"] * rate / 1000, 2)
    return out


def goals(report: Report) -> None:
    instant = [r for r in report.rows if r.get("stub_delay_s") == 0.0]
    if instant:
        best = max(r["transcripts_per_s"] for r in instant)
        report.emit(goal=">= 50 transcripts/s, instant stub", figure=best, met=best >= 50)
    slow = sorted(
        (r for r in report.rows if r.get("stub_delay_s") == 1.0),
        key=lambda r: r["extract_concurrency"],
    )
    if len(slow) > 1:
        rates = [r["transcripts_per_s"] for r in slow]
        grows = all(b > a for a, b in itertools.pairwise(rates))
        report.emit(goal="1 s stub: throughput grows with concurrency", figure=rates, met=grows)


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--delays", nargs="+", type=float)
    p.add_argument("--concurrency", nargs="+", type=int)
    p.add_argument("--transcripts", type=int)
    p.add_argument(
        "--cpu-accounting",
        action="store_true",
        help="also print the machine's CPU per transcript by process kind",
    )
    args = p.parse_args(argv)
    plan = dict(PLANS[args.size])
    plan["transcripts"] = args.transcripts or plan["transcripts"]
    db_url = pg_database(plan["db"])
    columns = ["stub_delay_s", "extract_concurrency", "transcripts", "done", "failed"]
    columns += ["transcripts_per_s", "enqueue_per_s", "extract_max_mib", "store_max_mib"]
    columns += ["cpu_ms_enqueue", "cpu_ms_extract", "cpu_ms_store", "cpu_ms_postgres"]
    report = Report("ingest", [*columns, "goal", "figure", "met"])
    accounting = None
    if args.cpu_accounting:
        head = ["stub_delay_s", "extract_concurrency", "transcripts_per_s"]
        accounting = Report("ingest_cpu", [*head, *(f"ms_{k}" for k in KINDS), "busy_cores"])
    for delay in args.delays or plan["delays"]:
        for concurrency in args.concurrency or plan["concurrency"]:
            print(
                f"ingest: stub delay {delay}s, extract concurrency {concurrency}", file=sys.stderr
            )
            run_cell(report, db_url, delay, concurrency, plan, accounting)
    goals(report)
    report.print_table()
    if accounting is not None:
        accounting.print_table()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
