"""Deduplication latency: one new memory against a user's 1k, 10k and 100k stored
memories, the way the store stage does it: candidates from the inverted keyword index
(`memlane.models.store.dedup_reads.candidates`, the prefix filter) in one unit of work, then
`memlane.pipeline.dedup.plan`.

    python -m bench.dedup                # the figures (reuses bench.assemble's data)
    python -m bench.dedup --size tiny    # a few seconds: proves it runs

Goals (issue 20): at 100k, p50 <= 2 ms and p99 <= 10 ms, and p50(100k) <= 1.5 x p50(1k),
on PostgreSQL and SQLite. The store is bench.assemble's generator with every sentence
that duplicates an earlier one (dedup's rule) drawn again (bench.deduplicated), so it
is a store the store stage could have left; bench.assemble's own store is bulk-loaded
and repeats a short template sentence ~3,000 times at 100k, which no deduplicated store
does (`--bulk` measures that one).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

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
from memlane.models.store import dedup_reads
from memlane.pipeline import dedup
from memlane.pipeline.records import ExtractedMemory


def sightings(count: int) -> list[dedup.Sighting]:
    texts = dataset.new_memory_texts(count)
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
    settings = load_settings(database_url=url)
    found: list[int] = []
    bumps = 0

    def call(i: int) -> None:
        nonlocal bumps
        sighting = new[i % len(new)]
        with unit_of_work(url) as session:
            known = dedup_reads.candidates(
                session, user, [sighting.keywords], threshold=settings.dedup_threshold
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

    for i in range(10):
        call(i)
    found.clear()
    bumps = 0
    durations: list[float] = []
    deadline = time.monotonic() + plan["seconds"]
    for i in range(plan["iterations"]):
        started = time.perf_counter()
        call(i)
        durations.append(time.perf_counter() - started)
        if len(durations) >= 10 and time.monotonic() > deadline:
            break
    return {
        **latency_summary(durations),
        "candidates_mean": round(sum(found) / len(found), 1),
        "candidates_max": max(found),
        "duplicates_found": bumps,
    }


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--backend", nargs="+", default=["postgresql", "sqlite"])
    p.add_argument("--sizes", nargs="+", type=int, help="memories per user (overrides --size)")
    p.add_argument("--bulk", action="store_true", help="bench.assemble's store, not deduplicated")
    args = p.parse_args(argv)
    plan = dict(PLANS[args.size])
    sizes = args.sizes or plan["sizes"]
    columns = ["backend", "memories", "n", "p50_ms", "p99_ms", "candidates_mean"]
    report = Report("dedup", [*columns, "duplicates_found", "goal", "figure_ms", "met"])
    new = sightings(500)
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
