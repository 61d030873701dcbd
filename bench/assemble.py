"""Assembly latency, warm: `Memlane.assemble(user, query, budget_tokens=4000,
query_embedding=<precomputed>)` for users with 1k, 10k and 100k memories, per strategy,
on PostgreSQL + pgvector (publishing record_access to Redis, as a fleet does) and on
SQLite (the embedded default, in-process worker). The floor, in the same run: one
trivial indexed query round trip, read the way the assembler reads.

    python -m bench.assemble                 # the figures (loads the data once, ~5 min)
    python -m bench.assemble --size tiny     # a few seconds: proves it runs
    python -m bench.assemble --backend postgresql --sizes 10000 --profile
    MEMLANE_EMBEDDING_MODEL=minilm python -m bench.assemble   # HNSW (own database)
    MEMLANE_EMBEDDING_MODEL=minilm python -m bench.assemble --embed-query  # embedding timed
    python -m bench.assemble --first-call      # also the first call of a fresh process

`--first-call`: beside the warm figures, a fresh process's first `assemble` (the query
embedded in the call, as a first request's is), cold (`first_cold_ms`: tokenizer and
embedder loads included) and after `Memlane.warm_process()` as `memlane serve` runs it at
start (`first_warmed_ms`; `warm_process_ms`: what the start paid for it), the median of
three processes each.
    python -m bench.assemble --backend postgresql --unprepared    # every read planned
    python -m bench.assemble --sizes 10000 --asking   # a chat's memories: questions, replies

Goals: PostgreSQL at 10k p50 <= 5 ms and p99 <= 15 ms; p50(100k) <= 4 x p50(1k).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, bindparam, event, select, text

from bench import dataset
from bench.common import (
    REDIS_URL,
    Report,
    flush_redis,
    latency_summary,
    parser,
    percentile,
    pg_database,
    sqlite_database,
    time_calls,
    truncate,
)
from memlane.config.settings import load_settings
from memlane.models.db import autocommit_engine, get_engine, unit_of_work
from memlane.models.pipelined import compile_read, run_reads
from memlane.models.store.memories.vector_index import ensure_for_users, wants_hnsw
from memlane.models.tables import MemoryRow
from memlane.pipeline.ranking.scoring import STRATEGIES
from memlane.service.facade import Memlane
from memlane.workers.embedders import get_embedder, query_cache

BUDGET = 4000
PLANS: dict[str, dict[str, Any]] = {
    "tiny": {"sizes": [200], "iterations": 10, "seconds": 1.0, "db": "memlane_bench_tiny"},
    "full": {
        "sizes": [1000, 10_000, 100_000],
        "iterations": 400,
        "seconds": 15.0,
        "db": "memlane_bench",
    },
}


def floor_query(url: str, memory_id: str) -> float:
    """p50 milliseconds of the cheapest read the assembler could do, the way it reads:
    one primary-key lookup, on PostgreSQL in one pipelined round trip on the same pool
    of connections (models/pipelined.py), on SQLite in its own unit of work."""
    if url.startswith("postgresql"):
        lookup = compile_read(select(MemoryRow.id).where(MemoryRow.id == bindparam("id")))
        engine = autocommit_engine(url)

        def call(_: int) -> None:
            run_reads(engine, [(lookup, {"id": memory_id})])

    else:

        def call(_: int) -> None:
            with unit_of_work(url) as session:
                session.execute(text("SELECT 1 FROM memories WHERE id = :id"), {"id": memory_id})

    durations = time_calls(call, warmup=20, iterations=500, max_seconds=3.0)
    return float(latency_summary(durations)["p50_ms"])


def bench_backend(report: Report, backend: str, url: str, plan: dict[str, Any], args: Any) -> None:
    overrides: dict[str, Any] = {}
    if args.top_k is not None:
        overrides = {"vector_top_k": args.top_k, "strategy_top_k": args.top_k}
    settings = load_settings(
        database_url=url,
        broker_url=REDIS_URL if backend == "postgresql" else None,
        **overrides,
    )
    embedder = get_embedder(settings)
    questions = dataset.queries(50)
    vectors = embedder.embed(questions)
    truncate(url, ["context_packs"])
    if backend == "postgresql" and args.unprepared:
        never_prepare(autocommit_engine(url))
    with Memlane(settings) as lane:
        for size in plan["sizes"]:
            user = dataset.ensure_user(
                url, size, log=lambda m: print(m, file=sys.stderr), asking=args.asking
            )
            if wants_hnsw(settings.vector_index, embedder.capabilities):
                # as the store worker does once a user is large; instant afterwards
                ensure_for_users(
                    get_engine(url), [user], embedder.name, embedder.dim, settings.hnsw_min_memories
                )
            lane.warm(user)  # timed warm: a large user's view otherwise loads meanwhile
            floor = floor_query(url, f"mem_{user}_{0:07d}")
            for strategy in args.strategies:
                cpu: list[float] = []

                def call(
                    i: int, strategy: str = strategy, user: str = user, cpu: list[float] = cpu
                ) -> None:
                    q = i % len(questions)
                    if args.embed_query:  # each call embeds, as a query not seen before
                        query_cache._QUERY_CACHE.clear()
                    started = time.thread_time()
                    lane.assemble(
                        user,
                        questions[q],
                        strategy=strategy,  # type: ignore[arg-type]
                        budget_tokens=BUDGET,
                        query_embedding=None if args.embed_query else vectors[q],
                        now=dataset.NOW,
                    )
                    cpu.append(time.thread_time() - started)

                time_calls(call, warmup=5, iterations=0, max_seconds=0)
                cpu.clear()
                profiler = cProfile.Profile() if args.profile else None
                if profiler:
                    profiler.enable()
                durations = time_calls(
                    call, warmup=0, iterations=plan["iterations"], max_seconds=plan["seconds"]
                )
                if profiler:
                    profiler.disable()
                    print_profile(profiler, f"{backend} {size:,} {strategy}")
                lane.flush()
                report.emit(
                    backend=backend,
                    memories=size,
                    strategy=strategy,
                    top_k=settings.vector_top_k,
                    budget_tokens=BUDGET,
                    prepared=not args.unprepared,
                    asking=bool(args.asking),
                    query_embedded=bool(args.embed_query),
                    **latency_summary(durations),
                    floor_p50_ms=floor,
                    # the calling thread's CPU per call: what the wall time is on an idle
                    # machine but for waits (the change read, the pack writer's turns)
                    cpu_p50_ms=round(percentile([c * 1e3 for c in cpu], 50), 3),
                    cpu_p99_ms=round(percentile([c * 1e3 for c in cpu], 99), 3),
                )
            if args.first_call:
                lane.flush()
                bench_first_calls(report, backend, url, user, size)
    if backend == "postgresql":
        flush_redis()


FIRST_CALL_RUNS = 3


def first_call_child(url: str, user: str, warmed: bool, broker: str | None) -> None:
    """In a fresh process: one assemble, timed (after warm_process when `warmed`)."""
    questions = dataset.queries(2)  # made before the clock starts: the bench's, not memlane's
    started = time.perf_counter()
    with Memlane(load_settings(database_url=url, broker_url=broker)) as lane:
        warm_ms = 0.0
        if warmed:
            lane.warm_process()
            warm_ms = (time.perf_counter() - started) * 1e3
        first = time.perf_counter()
        lane.assemble(user, questions[0], budget_tokens=BUDGET, now=dataset.NOW)
        first_ms = (time.perf_counter() - first) * 1e3
        again = time.perf_counter()
        lane.assemble(user, questions[1], budget_tokens=BUDGET, now=dataset.NOW)
        second_ms = (time.perf_counter() - again) * 1e3
    print(json.dumps({"first_ms": first_ms, "second_ms": second_ms, "warm_ms": warm_ms}))


def first_call(url: str, user: str, *, warmed: bool, broker: str | None) -> dict[str, float]:
    """The medians of FIRST_CALL_RUNS fresh processes' first_call_child."""
    runs = []
    for _ in range(FIRST_CALL_RUNS):
        command = [sys.executable, "-m", "bench.assemble", "--first-call-child", url, user]
        command += ["warmed" if warmed else "cold", broker or ""]
        done = subprocess.run(
            command, capture_output=True, text=True, check=True, env={**os.environ}
        )
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return {key: round(statistics.median(r[key] for r in runs), 1) for key in runs[0]}


def bench_first_calls(report: Report, backend: str, url: str, user: str, size: int) -> None:
    broker = REDIS_URL if backend == "postgresql" else None
    cold = first_call(url, user, warmed=False, broker=broker)
    warmed = first_call(url, user, warmed=True, broker=broker)
    report.emit(
        backend=backend,
        memories=size,
        strategy="scored",
        first_cold_ms=cold["first_ms"],
        first_warmed_ms=warmed["first_ms"],
        warm_process_ms=warmed["warm_ms"],
        second_ms=warmed["second_ms"],
    )


def never_prepare(engine: Engine) -> None:
    """psycopg prepares no statement on `engine`'s connections from now on: every read
    is planned, as a user's is in a process whose connections have each read for more
    than 100 other users since (models/store/reads/assembly.py, `_pg_sql`)."""
    engine.dispose()

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.prepare_threshold = None


def print_profile(profiler: cProfile.Profile, title: str) -> None:
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(25)
    stats.sort_stats("tottime").print_stats(25)
    print(f"\n--- profile: {title} ---\n{out.getvalue()}", file=sys.stderr)


def goals(report: Report) -> None:
    """The issue's goals, from the PostgreSQL `scored` rows."""
    rows = {
        r["memories"]: r
        for r in report.rows
        if r["backend"] == "postgresql" and r["strategy"] == "scored"
    }
    if 10_000 in rows:
        r = rows[10_000]
        report.emit(goal="p50 at 10k <= 5 ms", figure_ms=r["p50_ms"], met=r["p50_ms"] <= 5.0)
        report.emit(goal="p99 at 10k <= 15 ms", figure_ms=r["p99_ms"], met=r["p99_ms"] <= 15.0)
    if 1000 in rows and 100_000 in rows:
        ratio = rows[100_000]["p50_ms"] / rows[1000]["p50_ms"]
        report.emit(goal="p50(100k) <= 4 x p50(1k)", figure_ratio=round(ratio, 2), met=ratio <= 4)


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--backend", nargs="+", default=["postgresql", "sqlite"])
    p.add_argument("--sizes", nargs="+", type=int, help="memories per user (overrides --size)")
    p.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=STRATEGIES)
    p.add_argument(
        "--top-k", type=int, help="vector_top_k and strategy_top_k (default: the settings')"
    )
    p.add_argument("--iterations", type=int, help="timed calls per cell (overrides --size)")
    p.add_argument("--profile", action="store_true", help="cProfile each cell (stderr)")
    p.add_argument(
        "--embed-query",
        action="store_true",
        help="embed the query inside each timed call (default: the embedding is given)",
    )
    p.add_argument(
        "--unprepared",
        action="store_true",
        help="PostgreSQL: plan every read (a user whose prepared statement a busy "
        "process's connections no longer keep)",
    )
    p.add_argument(
        "--asking",
        action="store_true",
        help="memories said in conversations, one in five a question (bench.dataset): "
        "assembly rule 4's replies read and walked",
    )
    p.add_argument(
        "--first-call",
        action="store_true",
        help="also time a fresh process's first assemble, cold and after warm_process",
    )
    p.add_argument("--first-call-child", nargs=4, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.first_call_child:
        url, user, mode, broker = args.first_call_child
        first_call_child(url, user, mode == "warmed", broker or None)
        return 0
    plan = dict(PLANS[args.size])
    plan["sizes"] = args.sizes or plan["sizes"]
    plan["iterations"] = args.iterations or plan["iterations"]
    columns = ["backend", "memories", "strategy", "n", "p50_ms", "p99_ms", "cpu_p50_ms"]
    columns += ["cpu_p99_ms", "floor_p50_ms"]
    columns += ["first_cold_ms", "first_warmed_ms", "warm_process_ms", "second_ms"]
    report = Report("assemble", [*columns, "goal", "figure_ms", "figure_ratio", "met"])
    # One database per embedder: its vectors are loaded with the data.
    name = load_settings().embedding_model
    db = plan["db"] if name == "hashing" else f"{plan['db']}_{re.sub('[^a-z0-9]+', '_', name)}"
    for backend in args.backend:
        if backend == "postgresql":
            url = pg_database(db)
        else:
            url = sqlite_database(Path(tempfile.gettempdir()) / f"{db}.sqlite")
        bench_backend(report, backend, url, plan, args)
    goals(report)
    report.print_table()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
