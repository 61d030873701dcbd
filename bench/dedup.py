"""Deduplication latency: one new memory against a user's 1k, 10k and 100k stored
memories, the way the store stage does it: candidates from the inverted keyword index
(`memlane.models.store.reads.dedup.candidates`, the prefix filter), then
`memlane.pipeline.dedup.plan.plan`: in the caller's transaction, as the store stage runs them
(`p50_ms`, `p99_ms`; `cpu_ms`: this process's CPU per call, which the machine's load
inflates less than the wall times; `cpu_p50_ms`, `cpu_p99_ms`: each call's CPU, the
calling thread's plus, for a PostgreSQL server on this machine, its backend's, read from
/proc/<pid>/schedstat: on a shared machine the wall p99 is mostly the neighbours' work,
this one the lookup's own), and each in a unit of work of its own (`uow_p50_ms`,
`uow_p99_ms`). `candidates_mean` / `candidates_max`: the memories returned, those the
plan reads (`dedup_needs`), not all the probes found.

    python -m bench.dedup                # the figures (reuses bench.assemble's data)
    python -m bench.dedup --size tiny    # a few seconds: proves it runs

Goals (issue 20): at 100k, p50 <= 2 ms and p99 <= 10 ms, and p50(100k) <= 1.5 x p50(1k),
on PostgreSQL and SQLite. The store is bench.assemble's generator with every sentence
that duplicates an earlier one (dedup's rule) drawn again (bench.deduplicated), so it
is a store the store stage could have left, and its tail vocabulary grows with the
store as real text's does (`bench.dataset.growing_vocabulary`); bench.assemble's own
store is bulk-loaded from a fixed vocabulary and repeats a short template sentence ~3,000
times at 100k, which no deduplicated store does (`--bulk` measures that one).
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from bench import dataset
from bench.assemble import PLANS
from bench.common import (
    Report,
    latency_summary,
    parser,
    pg_database,
    sqlite_database,
)
from memlane.config.settings import load_settings
from memlane.models.db import unit_of_work
from memlane.models.store.reads import dedup as dedup_reads
from memlane.pipeline.dedup import plan as dedup
from memlane.pipeline.records import ExtractedMemory


def sightings(count: int, vocab: dataset.Vocabulary | None = None) -> list[dedup.Sighting]:
    texts = dataset.new_memory_texts(count, vocab=vocab)
    return [
        dedup.Sighting.of(
            ExtractedMemory(content=text, category="fact", importance=0.7, confidence=1.0),
            conversation_id="bench-new",
            new_from_seq=0,
            end_seq=19,
        )
        for text in texts
    ]


def bench_size(
    url: str, user: str, new: list[dedup.Sighting], plan: dict[str, Any]
) -> dict[str, Any]:
    """The lookup and plan timed as the store stage runs them, in its transaction (one
    transaction for the whole run: BEGIN, the pool's checkout and COMMIT are the store
    stage's anyway, for its lock and its writes), then each call in a unit of work of its
    own (`uow_…`), as a caller with no transaction open would pay."""
    settings = load_settings(database_url=url)
    found: list[int] = []
    bumps = 0

    def call(session: Session, i: int) -> None:
        nonlocal bumps
        sighting = new[i % len(new)]
        known = dedup_reads.candidates(
            session,
            user,
            [(sighting.memory.content, sighting.keywords)],
            threshold=settings.dedup_threshold,
            min_keywords=settings.dedup_min_keywords,
        )
        result = dedup.plan(
            [sighting],
            known,
            now=dataset.NOW,
            threshold=settings.dedup_threshold,
            min_keywords=settings.dedup_min_keywords,
        )
        found.append(len(known))
        bumps += bool(result.bumps)

    def own_unit(i: int) -> None:
        with unit_of_work(url) as session:
            call(session, i)

    with unit_of_work(url) as session:
        backend = _backend_clock(session)
        spent: list[float] = []

        def counted(i: int) -> None:
            started = time.thread_time_ns() + backend()
            call(session, i)
            spent.append((time.thread_time_ns() + backend() - started) / 1e9)

        cpu_started = time.process_time()
        in_transaction = timed(counted, plan)
        cpu_ms = (time.process_time() - cpu_started) * 1000 / (len(in_transaction) + 10)
    cpu = latency_summary(spent[10:])
    figures = {
        **latency_summary(in_transaction),
        "cpu_ms": round(cpu_ms, 3),
        "cpu_p50_ms": cpu["p50_ms"],
        "cpu_p99_ms": cpu["p99_ms"],
        "candidates_mean": round(sum(found) / len(found), 1),
        "candidates_max": max(found),
        "duplicates_found": bumps,
    }
    alone = latency_summary(timed(own_unit, plan))
    return {**figures, "uow_p50_ms": alone["p50_ms"], "uow_p99_ms": alone["p99_ms"]}


def _backend_clock(session: Session) -> Callable[[], int]:
    """Nanoseconds of CPU the session's PostgreSQL backend has used, when the server runs
    on this machine (Linux's /proc/<pid>/schedstat); 0 always otherwise (SQLite runs in
    the calling thread)."""
    if session.get_bind().dialect.name != "postgresql":
        return lambda: 0
    pid = session.execute(text("SELECT pg_backend_pid()")).scalar_one()
    stat = Path(f"/proc/{pid}/schedstat")
    try:
        stat.read_text()
    except OSError:
        return lambda: 0
    return lambda: int(stat.read_text().split()[0])


def timed(call: Callable[[int], None], plan: dict[str, Any]) -> list[float]:
    for i in range(10):
        call(i)
    durations: list[float] = []
    deadline = time.monotonic() + plan["seconds"]
    for i in range(plan["iterations"]):
        started = time.perf_counter()
        call(i)
        durations.append(time.perf_counter() - started)
        if len(durations) >= 10 and time.monotonic() > deadline:
            break
    return durations


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--backend", nargs="+", default=["postgresql", "sqlite"])
    p.add_argument("--sizes", nargs="+", type=int, help="memories per user (overrides --size)")
    p.add_argument("--bulk", action="store_true", help="bench.assemble's store, not deduplicated")
    args = p.parse_args(argv)
    plan = dict(PLANS[args.size])
    sizes = args.sizes or plan["sizes"]
    columns = ["backend", "memories", "n", "p50_ms", "p99_ms", "candidates_mean"]
    columns += ["cpu_ms", "cpu_p50_ms", "cpu_p99_ms", "duplicates_found", "uow_p50_ms"]
    columns += ["uow_p99_ms"]
    report = Report("dedup", [*columns, "goal", "figure_ms", "met"])
    for backend in args.backend:
        if backend == "postgresql":
            url = pg_database(plan["db"])
        else:
            url = sqlite_database(Path(tempfile.gettempdir()) / f"{plan['db']}.sqlite")
        rows = {}
        for size in sizes:
            user = dataset.ensure_user(
                url, size, log=lambda m: print(m, file=sys.stderr), deduplicated=not args.bulk
            )
            vocab = None if args.bulk else dataset.growing_vocabulary(size)
            new = sightings(500, vocab)
            rows[size] = report.emit(
                backend=backend, memories=size, **bench_size(url, user, new, plan)
            )
        if 100_000 in rows:
            p50, p99 = rows[100_000]["p50_ms"], rows[100_000]["p99_ms"]
            report.emit(backend=backend, goal="p50 at 100k <= 2 ms", figure_ms=p50, met=p50 <= 2)
            report.emit(backend=backend, goal="p99 at 100k <= 10 ms", figure_ms=p99, met=p99 <= 10)
            if 1000 in rows:
                ratio = round(p50 / rows[1000]["p50_ms"], 2)
                report.emit(
                    backend=backend,
                    goal="p50(100k) <= 1.5 x p50(1k)",
                    figure_ms=ratio,
                    met=ratio <= 1.5,
                )
    report.print_table()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
