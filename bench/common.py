"""What every benchmark and drill shares: the machine, timing and percentiles, the output
(one JSON object per result line on stdout, a short table on stderr), and the databases.

Services are the same as the integration tests': PostgreSQL + pgvector and Redis on this
host. Benchmarks use their own database (memlane_bench…) and Redis db 12, so they never
touch another suite's data.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

import psycopg
from alembic.util import CommandError
from sqlalchemy import text

from memlane.models import migrate
from memlane.models.db import get_engine
from memlane.models.tables import Base
from memlane.workers.dispatch import InProcessDispatcher

ROOT = Path(__file__).resolve().parents[1]
PG_ADMIN_URL = os.environ.get(
    "MEMLANE_BENCH_PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/postgres"
)
REDIS_URL = os.environ.get("MEMLANE_BENCH_REDIS_URL", "redis://127.0.0.1:6379/12")
# Appended to every scratch database's name, so that two checkouts can run benchmarks (or
# the bench smoke tests) side by side without migrating each other's databases.
DB_SUFFIX = os.environ.get("MEMLANE_BENCH_DB_SUFFIX", "")
SIZES = ("tiny", "full")


# --------------------------------------------------------------------------- the machine


@cache
def machine() -> dict[str, Any]:
    """Cores and memory of this host, so every figure says what it was measured on."""
    memory_kib = 0
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_kib = int(line.split()[1])
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:  # not Linux: the fields stay approximate
        pass
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(memory_kib / 1024 / 1024, 1),
        "cpu": cpu,
        "python": platform.python_version(),
    }


def machine_line() -> str:
    m = machine()
    return f"{m['cores']} cores, {m['memory_gib']} GiB, {m['cpu']}, Python {m['python']}"


# --------------------------------------------------------------------------- timing


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation between closest ranks."""
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    position = (len(ordered) - 1) * q / 100.0
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def latency_summary(seconds: Sequence[float]) -> dict[str, Any]:
    """n, p50, p99, mean and max of a list of durations, in milliseconds."""
    ms = [s * 1000.0 for s in seconds]
    return {
        "n": len(ms),
        "p50_ms": round(percentile(ms, 50), 3),
        "p99_ms": round(percentile(ms, 99), 3),
        "mean_ms": round(sum(ms) / len(ms), 3),
        "max_ms": round(max(ms), 3),
    }


def time_calls(
    call: Callable[[int], object], *, warmup: int, iterations: int, max_seconds: float
) -> list[float]:
    """Durations of `call(i)`: `warmup` untimed calls, then up to `iterations` timed ones,
    stopping early (after at least 10) once `max_seconds` have passed."""
    for i in range(warmup):
        call(i)
    durations: list[float] = []
    deadline = time.monotonic() + max_seconds
    for i in range(iterations):
        started = time.perf_counter()
        call(i)
        durations.append(time.perf_counter() - started)
        if len(durations) >= 10 and time.monotonic() > deadline:
            break
    return durations


# --------------------------------------------------------------------------- output


class Report:
    """Result lines as JSON on stdout (each naming the benchmark and the machine), and the
    same rows as a table on stderr at the end."""

    def __init__(self, bench: str, columns: Sequence[str]) -> None:
        self.bench = bench
        self.columns = list(columns)
        self.rows: list[dict[str, Any]] = []

    def emit(self, **fields: Any) -> dict[str, Any]:
        # The load average says whether something else shared the machine meanwhile.
        load = round(os.getloadavg()[0], 2)
        row = {"bench": self.bench, **fields, "load_1m": load, "machine": machine()}
        print(json.dumps(row, sort_keys=False), flush=True)
        self.rows.append(row)
        return row

    def table(self) -> str:
        cells = [[_cell(row.get(c)) for c in self.columns] for row in self.rows]
        widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(self.columns)]
        lines = [
            f"{self.bench} on {machine_line()}",
            "  ".join(c.ljust(w) for c, w in zip(self.columns, widths, strict=True)),
        ]
        lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
        return "\n".join(lines)

    def print_table(self) -> None:
        print("\n" + self.table(), file=sys.stderr, flush=True)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    return str(value)


def goal(figure: float, limit: float) -> bool:
    return figure <= limit


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument(
        "--size",
        choices=SIZES,
        default="full",
        help="tiny: a few seconds, proves the benchmark runs (CI); full: the figures",
    )
    return p


# --------------------------------------------------------------------------- databases


def pg_url(database: str) -> str:
    base = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
    return f"{base}/{database}"


def pg_database(database: str, *, fresh: bool = False) -> str:
    """A migrated PostgreSQL database of that name (created, or dropped and re-created
    when `fresh`, or when it is at a revision this checkout does not know: a bench
    database left by another branch's code); returns its SQLAlchemy URL."""
    database += DB_SUFFIX
    url = pg_url(database)
    with psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5) as conn:
        query = "SELECT 1 FROM pg_database WHERE datname = %s"
        exists = conn.execute(query, (database,)).fetchone() is not None
        if exists and not fresh:
            try:
                migrate.upgrade(url)
                return url
            except CommandError as unknown:
                print(f"{database}: {unknown}; made again", file=sys.stderr)
            finally:
                get_engine(url).dispose()
        if exists:
            conn.execute(f'DROP DATABASE "{database}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{database}"')
    migrate.upgrade(url)
    return url


def sqlite_database(path: Path, *, fresh: bool = False) -> str:
    """A migrated SQLite file, made again when `fresh` or at a revision this checkout
    does not know (as pg_database)."""
    path = path.with_name(path.stem + DB_SUFFIX + path.suffix)
    url = f"sqlite:///{path}"
    if not fresh and path.exists():
        try:
            migrate.upgrade(url)
            return url
        except CommandError as unknown:
            print(f"{path}: {unknown}; made again", file=sys.stderr)
        finally:
            get_engine(url).dispose()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    migrate.upgrade(url)
    return url


def truncate(url: str, tables: Iterable[str] | None = None) -> None:
    """Empty the given tables (default: all of memlane's)."""
    names = list(tables or (t.name for t in reversed(Base.metadata.sorted_tables)))
    with get_engine(url).begin() as conn:
        if url.startswith("postgresql"):
            conn.execute(text(f"TRUNCATE {', '.join(names)} CASCADE"))
        else:
            for name in names:
                conn.execute(text(f"DELETE FROM {name}"))


def table_counts(url: str, tables: Iterable[str]) -> dict[str, int]:
    with get_engine(url).connect() as conn:
        return {
            t: int(conn.execute(text(f"SELECT count(*) FROM {t}")).scalar() or 0) for t in tables
        }


def flush_redis(url: str = REDIS_URL) -> None:
    import redis

    redis.Redis.from_url(url).flushdb()


def env_for_children(**extra: str) -> dict[str, str]:
    """The environment of worker processes: this one's, without MEMLANE_* leaking in."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
    return {**clean, **extra}


def settings_env(settings: Mapping[str, str]) -> dict[str, str]:
    return {f"MEMLANE_{k.upper()}": v for k, v in settings.items()}


class NoAccessRecords(InProcessDispatcher):
    """The in-process worker without access records: every assembly sees the same store
    (an included memory's accessed_at would otherwise move, and its recency with it)."""

    def record_access(
        self, memory_ids: Sequence[str], accessed_at: datetime | Sequence[datetime]
    ) -> None:
        return None
