"""Where one transcript's CPU goes on its way in: the three steps the fleet runs, in this
process and one after another, each under cProfile.

1. `Memlane.enqueue` (validation, the messages and the job row, the publish to Redis);
2. `memlane.workers.runner.run_extract` (litellm calling the loopback stub, which answers at once);
3. `memlane.workers.runner.run_store` (embeddings, dedup under the user's lock, the insert).

    python -m bench.profile_ingest [--transcripts 100] [--top 20]

Prints milliseconds per transcript for each step, then each step's profile (functions
by cumulative time) on stderr. Celery's own cost (receiving, acking, events) is not in
here; bench.ingest's per-process CPU figures include it.
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

from bench.common import REDIS_URL, Report, flush_redis, pg_database, truncate
from bench.fleet import transcript
from bench.stub import configure
from memlane.config.settings import load_settings
from memlane.facade import Memlane
from memlane.workers import runner
from tests.llm_stub import LLMStub


def profiled(label: str, items: list[Any], step: Callable[[Any], object], top: int) -> float:
    """Run `step` on each item under cProfile; print the profile, return ms per item."""
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    for item in items:
        step(item)
    profiler.disable()
    per_item = (time.perf_counter() - started) * 1000 / len(items)
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
    print(f"\n--- {label}: {per_item:.1f} ms per transcript (under cProfile) ---", file=sys.stderr)
    print(out.getvalue(), file=sys.stderr)
    return per_item


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--transcripts", type=int, default=100)
    p.add_argument("--top", type=int, default=20)
    args = p.parse_args(argv)
    db_url = pg_database("memlane_bench_profile")
    truncate(db_url)
    flush_redis()
    report = Report("profile_ingest", ["step", "transcripts", "ms_per_transcript"])
    with LLMStub() as stub:
        configure(stub, answer_count=50, drill=False)
        settings = load_settings(
            database_url=db_url,
            broker_url=REDIS_URL,
            llm_model="openai/stub-model",
            llm_api_base=stub.base_url,
            llm_api_key="x",
        )
        items = [transcript(f"user{n % 50}", f"prof-{n}", n) for n in range(args.transcripts)]
        with Memlane(settings) as lane:
            lane.enqueue(transcript("warm-user", "warm-conv", -1))  # connections, imports
            job_ids: list[str] = []

            def enqueue(item: dict[str, Any]) -> None:
                job_ids.extend(lane.enqueue(item).job_ids)

            ms = profiled("enqueue", items, enqueue, args.top)
            report.emit(step="enqueue", transcripts=len(items), ms_per_transcript=round(ms, 1))
        runner.run_extract(job_ids.pop(0), settings)  # litellm's import and first call
        ms = profiled("extract", job_ids, lambda j: runner.run_extract(j, settings), args.top)
        report.emit(step="run_extract", transcripts=len(job_ids), ms_per_transcript=round(ms, 1))
        ms = profiled("store", job_ids, lambda j: runner.run_store(j, settings), args.top)
        report.emit(step="run_store", transcripts=len(job_ids), ms_per_transcript=round(ms, 1))
    flush_redis()
    report.print_table()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
