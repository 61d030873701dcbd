"""Assembly latency against an earlier version, in one process: this checkout's
`Memlane.assemble` and a git revision's, on the same user of bench.assemble's data,
called in turn (A B, then B A) so both see the same machine from one call to the next.
Runs of bench.assemble in separate processes drift by more than the difference a change
makes (p50 ±20% between runs on a shared 2-core VM); in turn, the ratio holds to ~2%.

    python -m bench.assemble_ab --base 148e630                 # PostgreSQL and SQLite, 10k
    python -m bench.assemble_ab --base 148e630 --asking        # a chat's memories (replies)

The revision's `memlane` package is taken from git (`git archive`) into a temporary
folder as `memlane_base` (its imports renamed); migrations it does not know are copied
to it so it opens this checkout's schema. Reports each side's p50 and p90 of wall and of
the calling thread's CPU per call, and their ratios (this checkout / the revision).
"""

from __future__ import annotations

import argparse
import importlib
import io
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import dataset
from bench.common import REDIS_URL, Report, percentile, pg_database, sqlite_database
from memlane.config.settings import load_settings

ROOT = Path(__file__).resolve().parents[1]
BUDGET, WARMUP = 4000, 20
PLANS = {"tiny": {"size": 200, "calls": 10}, "full": {"size": 10_000, "calls": 2000}}
_IMPORT = re.compile(r"^(\s*)(from|import) memlane\b", re.MULTILINE)


def base_package(revision: str, into: Path) -> str:
    """`memlane` at `revision`, importable from `into` as `memlane_base`."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", revision, "memlane"],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    package = into / "memlane_base"
    (into / "memlane").rename(package)
    for source in package.rglob("*.py"):
        text = source.read_text()
        text = _IMPORT.sub(r"\1\2 memlane_base", text.replace("memlane.", "memlane_base."))
        source.write_text(text)
    versions = "models/migrations/versions"
    for migration in (ROOT / "memlane" / versions).glob("*.py"):
        if not (package / versions / migration.name).exists():
            shutil.copy(migration, package / versions / migration.name)
    return "memlane_base"


def open_lane(package: str, url: str, backend: str, user: str, questions: list[str]) -> Any:
    settings = importlib.import_module(f"{package}.config.settings").load_settings(
        database_url=url, broker_url=REDIS_URL if backend == "postgresql" else None
    )
    embedder = importlib.import_module(f"{package}.workers.embedders").get_embedder(settings)
    lane = importlib.import_module(f"{package}.service.facade").Memlane(settings)
    lane.__enter__()
    lane.warm(user)
    return lane, embedder.embed(questions)


def compare(report: Report, backend: str, url: str, base: str, args: Any) -> None:
    size = PLANS[args.size]["size"]
    user = dataset.ensure_user(
        url, size, log=lambda m: print(m, file=sys.stderr), asking=args.asking
    )
    questions = dataset.queries(50)
    lanes = {name: open_lane(name, url, backend, user, questions) for name in ("memlane", base)}
    wall: dict[str, list[float]] = {name: [] for name in lanes}
    cpu: dict[str, list[float]] = {name: [] for name in lanes}
    calls = args.calls or PLANS[args.size]["calls"]
    for i in range(WARMUP + calls):
        q = i % len(questions)
        names = list(lanes) if i % 2 == 0 else list(reversed(lanes))
        for name in names:
            lane, vectors = lanes[name]
            started, thread = time.perf_counter(), time.thread_time()
            lane.assemble(
                user,
                questions[q],
                strategy="scored",
                budget_tokens=BUDGET,
                query_embedding=vectors[q],
                now=dataset.NOW,
            )
            if i >= WARMUP:  # the first calls count each user's lines once
                cpu[name].append((time.thread_time() - thread) * 1e3)
                wall[name].append((time.perf_counter() - started) * 1e3)
    for lane, _ in lanes.values():
        lane.__exit__(None, None, None)
    for name in lanes:
        report.emit(
            backend=backend,
            asking=bool(args.asking),
            side="this checkout" if name == "memlane" else args.base,
            memories=size,
            n=calls,
            p50_ms=round(statistics.median(wall[name]), 3),
            p90_ms=round(percentile(wall[name], 90), 3),
            cpu_p50_ms=round(statistics.median(cpu[name]), 3),
            cpu_p90_ms=round(percentile(cpu[name], 90), 3),
        )
    report.emit(
        backend=backend,
        asking=bool(args.asking),
        side="ratio",
        memories=size,
        n=calls,
        p50_ms=round(statistics.median(wall["memlane"]) / statistics.median(wall[base]), 3),
        cpu_p50_ms=round(statistics.median(cpu["memlane"]) / statistics.median(cpu[base]), 3),
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", required=True, help="the git revision compared against")
    p.add_argument("--backend", nargs="+", default=["postgresql", "sqlite"])
    p.add_argument("--size", choices=sorted(PLANS), default="full", help="tiny: proves it runs")
    p.add_argument("--calls", type=int, help="timed calls of each side (overrides --size)")
    p.add_argument("--asking", action="store_true", help="bench.assemble --asking's data")
    args = p.parse_args(argv)
    columns = [
        "backend",
        "asking",
        "memories",
        "side",
        "n",
        "p50_ms",
        "p90_ms",
        "cpu_p50_ms",
        "cpu_p90_ms",
    ]
    report = Report("assemble_ab", columns)
    # one database per embedder, as bench.assemble's: its vectors are loaded with the data
    model = re.sub("[^a-z0-9]+", "_", load_settings().embedding_model)
    db = f"memlane_bench_ab_{model}" + ("_tiny" if args.size == "tiny" else "")
    with tempfile.TemporaryDirectory() as folder:
        base = base_package(args.base, Path(folder))
        sys.path.insert(0, folder)
        for backend in args.backend:
            url = (
                pg_database(db)
                if backend == "postgresql"
                else sqlite_database(Path(tempfile.gettempdir()) / f"{db}.sqlite")
            )
            compare(report, backend, url, base, args)
    report.print_table()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
