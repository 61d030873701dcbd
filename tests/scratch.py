"""The scratch services of this test process: its PostgreSQL database and its Redis
database, each its own.

A run of the suite takes a slot: a PostgreSQL advisory lock held until the run ends, so
two runs at once (in one checkout or two) never empty each other's databases; the second
takes the next slot. With pytest-xdist every worker of a run also has its own: worker gwN
of slot s uses the database `memlane_test[_s<s>][_gw<N>]` and Redis database
15 - (7·s + N), and benchmarks a test starts use the same Redis database and
databases suffixed the same way (MEMLANE_BENCH_*). A run without xdist in slot 0 uses
`memlane_test` and Redis database 15, as before.

MEMLANE_TEST_PG_ADMIN (the server), MEMLANE_TEST_PG_DB (the base name) and
MEMLANE_TEST_REDIS_URL (the server; its database number is the slot's and worker's) move
them elsewhere.
"""

from __future__ import annotations

import os
import re
import zlib
from dataclasses import dataclass
from functools import cache

import psycopg

ADMIN_URL = os.environ.get("MEMLANE_TEST_PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/postgres")
BASE_DB = os.environ.get("MEMLANE_TEST_PG_DB", "memlane_test")
REDIS_SERVER = os.environ.get("MEMLANE_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
SLOT_VARIABLE = "MEMLANE_TEST_SLOT"
SLOTS = 2
# Redis databases 15 down to 2: 2 runs of up to 7 workers. 0 and 1, where applications'
# defaults point, are never used (a test flushes its database).
WORKERS_PER_SLOT = 7
_held: list[psycopg.Connection] = []  # the slot's lock lives as long as its connection


@dataclass(frozen=True)
class Scratch:
    suffix: str  # of every database name this process makes
    pg_db: str
    pg_url: str  # SQLAlchemy's
    redis_url: str


def take_slot() -> int:
    """The first free slot, locked for this process's life; 0 when PostgreSQL cannot be
    reached (the tests that need it then fail, naming it)."""
    key = zlib.crc32(BASE_DB.encode()) - 2**31  # an int4, one per base name
    try:
        conn = psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError:
        return 0
    for slot in range(SLOTS):
        locked = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (key, slot)).fetchone()
        if locked and locked[0]:
            _held.append(conn)
            return slot
    conn.close()
    raise RuntimeError(
        f"{SLOTS} test runs on {BASE_DB} are going on already: wait for one to end, or "
        "set MEMLANE_TEST_PG_DB to another base name"
    )


def scratch_for(slot: int, worker: str | None) -> Scratch:
    """The scratch services of xdist worker `worker` (gwN; None without xdist) in a
    run of slot `slot`."""
    number = int(worker.removeprefix("gw")) if worker else 0
    if number >= WORKERS_PER_SLOT:
        raise RuntimeError(f"at most {WORKERS_PER_SLOT} test workers (pytest -n) at once")
    suffix = (f"_s{slot}" if slot else "") + (f"_{worker}" if worker else "")
    pg_db = BASE_DB + suffix
    server = ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
    redis_db = 15 - (WORKERS_PER_SLOT * slot + number)
    return Scratch(
        suffix=suffix,
        pg_db=pg_db,
        pg_url=f"{server}/{pg_db}",
        redis_url=f"{re.sub(r'/[0-9]*$', '', REDIS_SERVER)}/{redis_db}",
    )


@cache
def scratch() -> Scratch:
    """This process's: its run's slot, its xdist worker."""
    slot = int(os.environ.get(SLOT_VARIABLE, "0"))
    return scratch_for(slot, os.environ.get("PYTEST_XDIST_WORKER"))


def export_to_benchmarks() -> None:
    """Benchmarks a test starts (in this process or a child) use this process's Redis
    database and name their scratch databases with its suffix."""
    own = scratch()
    os.environ["MEMLANE_BENCH_REDIS_URL"] = own.redis_url
    # Another base name (MEMLANE_TEST_PG_DB: another checkout's run) names its
    # benchmarks' databases too, or two runs in the same slot would share them.
    base = "" if BASE_DB == "memlane_test" else f"_{BASE_DB.removeprefix('memlane_')}"
    os.environ["MEMLANE_BENCH_DB_SUFFIX"] = base + own.suffix
