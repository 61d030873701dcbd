"""Where one transcript's CPU goes on its way in: the three steps the fleet runs, in this
process and one after another, each under cProfile.

1. `Memlane.enqueue` (validation, the messages and the job row, the publish to Redis);
2. `memlane.workers.runner.run_extract` (litellm calling the loopback stub, in its own
   process, which answers at once);
3. `memlane.workers.runner.run_store` (embeddings, dedup under the user's lock, the insert).

    python -m bench.profile_ingest [--transcripts 100] [--exchanges 10] [--top 20]
    python -m bench.profile_ingest --no-profile   # CPU figures without cProfile's overhead
    python -m bench.profile_ingest --model openai/gpt-4o-mini   # a name litellm prices

A transcript is `--exchanges` user/assistant exchanges (10: 20 messages, two extraction
jobs at the default cadence). Prints, per transcript and step, the SQL statements sent
(an executemany counts once), the CPU milliseconds of this process (time.process_time:
less blurred by other work than wall time, though a loaded machine still inflates it by
a third or more) and the wall milliseconds, then each step's profile (functions by CPU
time, cumulative) on stderr. Celery's own cost (receiving, acking, events) is not in
here; bench.ingest's per-process CPU figures include it.

The stub answers whatever model is named. The default, `openai/stub-model`, is a name
litellm has no price for: it then searches its map's generalisation rules on every
call, up to ~1 ms of CPU a job (bench/README.md, 2026-11-28), which a deployment naming
a model litellm prices does not pay (`--model openai/gpt-4o-mini` measures that case).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

from bench.common import REDIS_URL, Report, flush_redis, pg_database, truncate
from bench.fleet import transcript
from bench.stub import stub_process
from memlane.config.settings import load_settings
from memlane.service.facade import Memlane
from memlane.workers import runner

_STATEMENTS = [0]


@event.listens_for(Engine, "before_cursor_execute")
def _count(*_: Any) -> None:
    # one per statement sent (an executemany counts once): what the machine's load cannot
    # blur, unlike the CPU figures
    _STATEMENTS[0] += 1


def profiled(
    label: str, items: list[Any], step: Callable[[Any], object], top: int, per: float
) -> tuple[float, float, float]:
    """Run `step` on each item, under cProfile unless `top` is 0 (then print nothing);
    return (CPU ms, wall ms, SQL statements) per transcript, `per` items making one."""
    # timed by CPU, so time waiting for PostgreSQL, Redis or the stub is not counted
    profiler = cProfile.Profile(time.process_time) if top else None
    started, cpu_started, statements = time.perf_counter(), time.process_time(), _STATEMENTS[0]
    if profiler:
        profiler.enable()
    for item in items:
        step(item)
    if profiler:
        profiler.disable()
    transcripts = len(items) / per
    cpu = (time.process_time() - cpu_started) * 1000 / transcripts
    wall = (time.perf_counter() - started) * 1000 / transcripts
    if profiler:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
        print(f"\n--- {label}: {cpu:.1f} ms CPU per transcript ---", file=sys.stderr)
        print(out.getvalue(), file=sys.stderr)
    return cpu, wall, (_STATEMENTS[0] - statements) / transcripts


def emit(report: Report, step: str, figures: tuple[float, float, float], **fields: Any) -> None:
    cpu, wall, statements = figures
    report.emit(
        step=step,
        sql_per_transcript=round(statements, 1),
        cpu_ms_per_transcript=round(cpu, 1),
        wall_ms_per_transcript=round(wall, 1),
        **fields,
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--transcripts", type=int, default=100)
    p.add_argument("--exchanges", type=int, default=10)
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--no-profile", action="store_true", help="no cProfile (its overhead)")
    p.add_argument(
        "--model", default="openai/stub-model", help="the litellm model the stub answers as"
    )
    args = p.parse_args(argv)
    top = 0 if args.no_profile else args.top
    db_url = pg_database("memlane_bench_profile")
    truncate(db_url)
    flush_redis()
    columns = [
        "step",
        "transcripts",
        "messages",
        "jobs",
        "sql_per_transcript",
        "cpu_ms_per_transcript",
    ]
    report = Report("profile_ingest", [*columns, "wall_ms_per_transcript", "profiled"])
    # the stub in its own process: its serving CPU is not the worker's
    with stub_process(0.0, answers=50) as (base_url, _pid):
        settings = load_settings(
            database_url=db_url,
            broker_url=REDIS_URL,
            llm_model=args.model,
            llm_api_base=base_url,
            llm_api_key="x",
        )
        items = [
            transcript(f"user{n % 50}", f"prof-{n}", n, assistant_messages=args.exchanges)
            for n in range(args.transcripts)
        ]
        common = {
            "transcripts": len(items),
            "messages": 2 * args.exchanges,
            "profiled": bool(top),
            "model": args.model,
        }
        with Memlane(settings) as lane:
            lane.enqueue(transcript("warm-user", "warm-conv", -1))  # connections, imports
            job_ids: list[str] = []

            def enqueue(item: dict[str, Any]) -> None:
                job_ids.extend(lane.enqueue(item).job_ids)

            figures = profiled("enqueue", items, enqueue, top, 1)
            per = len(job_ids) / len(items)  # jobs per transcript
            emit(report, "enqueue", figures, jobs=len(job_ids), **common)
        # litellm's import and first call, and the store stage's first embedder, apart
        warm = job_ids.pop(0)
        runner.run_extract(warm, settings)
        runner.run_store(warm, settings)
        extract = lambda j: runner.run_extract(j, settings)  # noqa: E731
        figures = profiled("extract", job_ids, extract, top, per)
        emit(report, "run_extract", figures, jobs=len(job_ids), **common)
        figures = profiled("store", job_ids, lambda j: runner.run_store(j, settings), top, per)
        emit(report, "run_store", figures, jobs=len(job_ids), **common)
    flush_redis()
    report.print_table()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
