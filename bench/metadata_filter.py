"""Assembly with a metadata filter beside the same assembly without one, warm:
`Memlane.assemble(user, query, budget_tokens=4000, query_embedding=…)` on bench.assemble's
users (1k and 10k memories), their memories given metadata once (a team of four, a score
of ten, a day of the month, a list of two tags: what a chat app might send), on
PostgreSQL and SQLite, through the working set (the default read) and with
`--store-read` through the store's read too (MEMLANE_WORKING_SET_MB=0: the filter in SQL).

    python -m bench.metadata_filter              # 1k and 10k, both backends
    python -m bench.metadata_filter --size tiny  # seconds: proves it runs

Filters: none; `{"team": "eng"}` (a quarter of the memories); `{"score": {"gte": 5},
"tags": {"in": ["red", "blue"]}}` (a range and a list, about a third); `team, new`: the
team's filter in a form not met before on every call, so the working set judges every
row afresh (as the first assembly after a write does; the others reuse the rows it
judged for the same view).

The filters are timed in turn, call after call (each meets the machine's same load);
`ratio` is a filter's p50 over the unfiltered p50, `cpu_ratio` the same of the calling
thread's CPU (what the wall time is on an idle machine but for waits).

Goal (issue 37 item 2): p50 with a filter within 1.5 x p50 without, at 10k.
"""

from __future__ import annotations

import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

import sqlalchemy as sa

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
from memlane.models.db import get_engine
from memlane.models.tables import MemoryRow
from memlane.service.facade import Memlane
from memlane.workers.embedders import get_embedder

BUDGET = 4000
PLANS: dict[str, dict[str, Any]] = {
    "tiny": {"sizes": [200], "iterations": 10, "seconds": 1.0, "db": "memlane_bench_tiny"},
    "full": {"sizes": [1000, 10_000], "iterations": 400, "seconds": 15.0, "db": "memlane_bench"},
}
TEAMS = ("eng", "ops", "sales", "legal")
TAGS = ("red", "green", "blue", "amber", "teal", "plum")
FILTERS: dict[str, dict[str, Any] | None] = {
    "none": None,
    "team": {"team": "eng"},
    "range+list": {"score": {"gte": 5}, "tags": {"in": ["red", "blue"]}},
    "team, new": None,  # `fresh_filter`: a filter the working set has not met
}


def fresh_filter(i: int) -> dict[str, Any]:
    """`{"team": "eng"}` in a form not met before: its rows judged afresh, as the first
    assembly after a write judges them (each memory's metadata its own object here)."""
    return {"team": {"in": ["eng", f"none-{i}"]}}


def metadata_for(ref: int) -> dict[str, Any]:
    """A memory's metadata by its short id: the same on every run and store."""
    return {
        "team": TEAMS[ref % len(TEAMS)],
        "score": ref % 10,
        "day": f"2026-01-{ref % 28 + 1:02d}",
        "tags": [TAGS[ref % len(TAGS)], TAGS[(ref // 7) % len(TAGS)]],
    }


def give_metadata(url: str, user_id: str) -> None:
    """The user's memories given their metadata, once (a later run finds it given)."""
    engine = get_engine(url)
    with engine.begin() as conn:
        bare = conn.execute(
            sa.select(MemoryRow.id, MemoryRow.ref).where(
                MemoryRow.user_id == user_id,
                sa.type_coerce(MemoryRow.meta, sa.Text) == "{}"
                if not url.startswith("postgresql")
                else sa.cast(MemoryRow.meta, sa.Text) == "{}",
            )
        ).all()
        table = cast(sa.Table, MemoryRow.__table__)
        update = (
            sa.update(table)
            .where(table.c.id == sa.bindparam("b_id"))
            .values(metadata=sa.bindparam("b_metadata", type_=table.c.metadata.type))
        )
        for start in range(0, len(bare), 2000):
            conn.execute(
                update,
                [{"b_id": i, "b_metadata": metadata_for(ref)} for i, ref in bare[start:][:2000]],
            )


def bench_backend(
    report: Report, backend: str, url: str, plan: dict[str, Any], *, store_read: bool
) -> None:
    settings = load_settings(
        database_url=url, broker_url=REDIS_URL if backend == "postgresql" else None
    )
    embedder = get_embedder(settings)
    questions = dataset.queries(50)
    vectors = embedder.embed(questions)
    truncate(url, ["context_packs"])
    reads = [("working-set", settings.working_set_mb)]
    if store_read:
        reads.append(("store", 0.0))
    for read, mb in reads:
        with Memlane(settings.model_copy(update={"working_set_mb": mb})) as lane:
            for size in plan["sizes"]:
                user = dataset.ensure_user(url, size, log=lambda m: print(m, file=sys.stderr))
                give_metadata(url, user)
                lane.warm(user)
                walls: dict[str, list[float]] = {name: [] for name in FILTERS}
                cpus: dict[str, list[float]] = {name: [] for name in FILTERS}

                def call(
                    i: int,
                    user: str = user,
                    walls: dict[str, list[float]] = walls,
                    cpus: dict[str, list[float]] = cpus,
                ) -> None:
                    # the filters in turn, so that each meets the machine's same load
                    q = i % len(questions)
                    for name, given in FILTERS.items():
                        where = fresh_filter(i) if name == "team, new" else given
                        wall, cpu = time.perf_counter(), time.thread_time()
                        lane.assemble(
                            user,
                            questions[q],
                            budget_tokens=BUDGET,
                            query_embedding=vectors[q],
                            now=dataset.NOW,
                            filter=where,
                        )
                        if i >= 0:
                            cpus[name].append(time.thread_time() - cpu)
                            walls[name].append(time.perf_counter() - wall)

                for i in range(5):
                    call(-1 - i)  # warm-up, not kept
                time_calls(
                    call, warmup=0, iterations=plan["iterations"], max_seconds=plan["seconds"]
                )
                lane.flush()
                base = latency_summary(walls["none"])["p50_ms"]
                base_cpu = percentile([c * 1e3 for c in cpus["none"]], 50)
                for name in FILTERS:
                    summary = latency_summary(walls[name])
                    cpu_p50 = percentile([c * 1e3 for c in cpus[name]], 50)
                    report.emit(
                        backend=backend,
                        read=read,
                        memories=size,
                        filter=name,
                        **summary,
                        ratio=round(summary["p50_ms"] / base, 2),
                        cpu_p50_ms=round(cpu_p50, 3),
                        cpu_ratio=round(cpu_p50 / base_cpu, 2),
                    )
    if backend == "postgresql":
        flush_redis()


def goals(report: Report) -> None:
    for row in list(report.rows):
        if row.get("memories") == 10_000 and row.get("filter") != "none":
            report.emit(
                goal=f"{row['backend']} {row['read']} 10k {row['filter']}: p50 <= 1.5 x unfiltered",
                figure_ratio=row["ratio"],
                met=row["ratio"] <= 1.5,
            )
            report.emit(
                goal=f"{row['backend']} {row['read']} 10k {row['filter']}: CPU p50 <= 1.5 x",
                figure_ratio=row["cpu_ratio"],
                met=row["cpu_ratio"] <= 1.5,
            )


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--backend", nargs="+", default=["postgresql", "sqlite"])
    p.add_argument("--sizes", nargs="+", type=int, help="memories per user (overrides --size)")
    p.add_argument("--iterations", type=int, help="timed calls per cell (overrides --size)")
    p.add_argument(
        "--store-read", action="store_true", help="also through the store's read (no working set)"
    )
    args = p.parse_args(argv)
    plan = dict(PLANS[args.size])
    plan["sizes"] = args.sizes or plan["sizes"]
    plan["iterations"] = args.iterations or plan["iterations"]
    columns = ["backend", "read", "memories", "filter", "n", "p50_ms", "p99_ms", "ratio"]
    columns += ["cpu_p50_ms", "cpu_ratio"]
    report = Report("metadata_filter", [*columns, "goal", "figure_ratio", "met"])
    # bench.assemble's databases: one per embedder, its vectors loaded with the data
    name = load_settings().embedding_model
    db = plan["db"] if name == "hashing" else f"{plan['db']}_{re.sub('[^a-z0-9]+', '_', name)}"
    for backend in args.backend:
        if backend == "postgresql":
            url = pg_database(db)
        else:
            url = sqlite_database(Path(tempfile.gettempdir()) / f"{db}.sqlite")
        bench_backend(report, backend, url, plan, store_read=args.store_read)
    goals(report)
    report.print_table()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
