"""The working set's own costs, per user size and backend (hashing embedder):

- load: a user's view read and built whole (`Memlane.warm`), what a user with at most
  EAGER_ITEMS items waits for on their first assembly;
- first assembly (cold): `Memlane.assemble` on a fresh working set, as the process's
  working set serves it (the load and the assembly on SQLite and for users of at most
  EAGER_ITEMS items; the store read, the view loading meanwhile, for larger users on
  PostgreSQL), with its CPU in the calling thread;
- first assembly of a large user: served by the store read while the view loads in the
  background (memlane.models.working_set);
- poll: the change-number read every later assembly pays when nothing changed;
- one change: a memory written by another unit of work, then the next `view` call (the
  number read, the changed rows read, the view patched).

    python -m bench.working_set                # 1k and 10k users, both backends
    python -m bench.working_set --size tiny    # seconds: proves it runs

Goals (issue 15): first assembly of a 10k user (cold) <= 150 ms; applying one change <= 1 ms.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import update

from bench import dataset
from bench.common import (
    Report,
    latency_summary,
    parser,
    percentile,
    pg_database,
    sqlite_database,
)
from memlane.config.settings import load_settings
from memlane.models.db import unit_of_work
from memlane.models.store.users import change_feed as changes
from memlane.models.tables import MemoryRow
from memlane.models.working_set import WorkingSet
from memlane.service.facade import Memlane
from memlane.workers.embedders import get_embedder

PLANS: dict[str, dict[str, Any]] = {
    "tiny": {"sizes": [200], "loads": 2, "changes": 5, "db": "memlane_bench_tiny"},
    "full": {"sizes": [1000, 10_000], "loads": 7, "changes": 60, "db": "memlane_bench"},
}


def timed(call: Any, cpu: list[float] | None = None) -> float:
    """Wall seconds of `call()`; its CPU seconds in the calling thread appended to `cpu`
    (on a machine shared with other work, the figure that measures the code)."""
    start, start_cpu = time.perf_counter(), time.thread_time()
    call()
    if cpu is not None:
        cpu.append(time.thread_time() - start_cpu)
    return time.perf_counter() - start


def cpu_p50(seconds: list[float]) -> dict[str, float]:
    return {"cpu_p50_ms": round(percentile([s * 1000.0 for s in seconds], 50), 3)}


def bench_user(report: Report, backend: str, url: str, size: int, plan: dict[str, Any]) -> None:
    user = dataset.ensure_user(url, size, log=lambda m: print(m, file=sys.stderr))
    settings = load_settings(database_url=url, broker_url=None)
    embedder = get_embedder(settings)
    # the view as the facade loads it (ContextBuilder._from_view)
    of: dict[str, Any] = {
        "model": embedder.name,
        "dim": embedder.dim,
        "sparse": embedder.capabilities.sparse,
    }
    row = dict(backend=backend, memories=size)
    loads: list[float] = []
    loads_cpu: list[float] = []
    for _ in range(plan["loads"]):
        working = WorkingSet(url, budget_mb=1024)
        loads.append(timed(lambda w=working: w.warm(user, **of), loads_cpu))
    report.emit(**row, measure="load (warm)", **latency_summary(loads), **cpu_p50(loads_cpu))
    query = dataset.queries(1)[0]
    vector = embedder.embed([query])[0]
    firsts = []
    colds: list[float] = []
    colds_cpu: list[float] = []
    with Memlane(settings) as lane:
        for i in range(plan["loads"] + 1):  # the first pays the process's own set-up
            lane.contexts._working = WorkingSet(url, budget_mb=1024)  # as in production
            cpu = colds_cpu if i else None
            cold = timed(lambda: lane.assemble(user, query, query_embedding=vector), cpu)
            colds += [cold] if i else []
            lane.warm(user)  # a background load (large users on PostgreSQL), done
        for _ in range(plan["loads"] + 1):
            lane.contexts._working = WorkingSet(url, budget_mb=1024, eager_items=0)  # in background
            firsts.append(timed(lambda: lane.assemble(user, query, query_embedding=vector)))
            lane.warm(user)  # the background load, done before the next round
    firsts = firsts[1:]
    first = dict(measure="first assembly (cold)", **latency_summary(colds), **cpu_p50(colds_cpu))
    report.emit(**row, **first)
    report.emit(**row, measure="first assembly, view loading", **latency_summary(firsts))
    working = WorkingSet(url, budget_mb=1024)
    working.warm(user, **of)
    polls = [timed(lambda: working.view(user, **of)) for _ in range(200)]
    report.emit(**row, measure="poll, nothing changed", **latency_summary(polls))
    applied: list[float] = []
    applied_cpu: list[float] = []
    memory_id = f"mem_{user}_{7:07d}"
    for i in range(plan["changes"]):
        with unit_of_work(url) as session:
            number = changes.stamp(session, user)
            session.execute(
                update(MemoryRow)
                .where(MemoryRow.id == memory_id)
                .values(importance=0.5 + (i % 2) / 10, change_seq=number)
            )
        applied.append(timed(lambda: working.view(user, **of), applied_cpu))
    report.emit(
        **row,
        measure="one change applied",
        **latency_summary(applied[1:]),
        **cpu_p50(applied_cpu[1:]),
    )


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--backend", nargs="+", default=["postgresql", "sqlite"])
    p.add_argument("--sizes", nargs="+", type=int, help="memories per user (overrides --size)")
    args = p.parse_args(argv)
    plan = dict(PLANS[args.size])
    columns = ["backend", "memories", "measure", "n", "p50_ms", "p99_ms", "cpu_p50_ms"]
    report = Report("working_set", columns)
    for backend in args.backend:
        if backend == "postgresql":
            url = pg_database(plan["db"])
        else:
            url = sqlite_database(Path(tempfile.gettempdir()) / f"{plan['db']}.sqlite")
        for size in args.sizes or plan["sizes"]:
            bench_user(report, backend, url, size, plan)
    report.print_table()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
