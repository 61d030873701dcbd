"""Engines and units of work. Engines are built on first use, never at import, so Celery's
forked children each build their own (see workers/app.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from memlane.config.extras import require

_T = TypeVar("_T")
_lock = threading.Lock()
_engines: dict[tuple[str, bool, bool], Engine] = {}
# sessionmaker builds a Session subclass and its event dispatch anew each time: a third
# of an empty unit of work's CPU when it was built per unit of work
_factories: dict[tuple[str, bool], sessionmaker[Session]] = {}
_autocommit_factories: dict[str, sessionmaker[Session]] = {}


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets the in-process worker write while a reader assembles; foreign keys are off
    # by default in SQLite and the schema relies on ON DELETE CASCADE.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=10000")
    # Reads through a memory map, not a read() call per page missing from SQLite's own
    # 2 MB cache: a short statement's dedup lookup reads hundreds of memory rows spread
    # over the file (6.0 → 1.3 ms for 481 rows of a 100k store, bench/README.md). The
    # map is address space, not memory; a file larger than it reads the rest as before.
    cursor.execute(f"PRAGMA mmap_size={SQLITE_MMAP_BYTES}")
    cursor.close()


SQLITE_MMAP_BYTES = 1 << 30


# Every PostgreSQL session reads vector top-k through HNSW indexes (store/memories/vector_index.py)
# with pgvector 0.8's iterative scans: a search filtered to one user goes on past
# ef_search candidates until the LIMIT is filled, instead of coming back short. Relaxed
# order is enough: the assembler re-sorts by the exact cosine. Set at connection start
# (a placeholder until pgvector loads), so the hot path pays no SET round trip.
# TimeZone UTC: psycopg then returns timestamps in datetime.UTC itself, which the reads
# that bypass the ORM types (models/pipelined.py) rely on.
PG_OPTIONS = "-c hnsw.iterative_scan=relaxed_order -c hnsw.ef_search=100 -c TimeZone=UTC"


def build_engine(url: str, *, pre_ping: bool = True, autocommit: bool = False) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    if url.startswith("postgresql"):
        require("a PostgreSQL database", "postgres", "psycopg")
    extra: dict[str, Any] = {"isolation_level": "AUTOCOMMIT"} if autocommit else {}
    return create_engine(
        url,
        **extra,
        pool_pre_ping=pre_ping,
        pool_size=5,
        max_overflow=10,
        connect_args={"options": PG_OPTIONS},
    )


def get_engine(url: str, *, pre_ping: bool = True) -> Engine:
    """One engine per URL per process; and one without the pre-ping for the hot read
    path (see `read_unit`)."""
    return _engine(url, pre_ping=pre_ping, autocommit=False)


def autocommit_engine(url: str) -> Engine:
    """PostgreSQL connections in autocommit, without the pre-ping, for the assembler's
    pipelined read (models/pipelined.py)."""
    return _engine(url, pre_ping=False, autocommit=True)


def _engine(url: str, *, pre_ping: bool, autocommit: bool) -> Engine:
    key = (url, pre_ping, autocommit)
    with _lock:
        engine = _engines.get(key)
        if engine is None:
            engine = _engines[key] = build_engine(url, pre_ping=pre_ping, autocommit=autocommit)
        return engine


def dispose_engines() -> None:
    """Forget this process's engines (after a fork, the parent's pools must not be reused)."""
    with _lock:
        for engine in _engines.values():
            engine.dispose(close=False)
        _engines.clear()
        _factories.clear()
        _autocommit_factories.clear()


def session_factory(url: str, *, pre_ping: bool = True) -> sessionmaker[Session]:
    """One per engine: the sessions of `unit_of_work` and `read_unit`."""
    factory = _factories.get((url, pre_ping))
    if factory is None:
        engine = get_engine(url, pre_ping=pre_ping)
        with _lock:
            factory = _factories.setdefault(
                (url, pre_ping), sessionmaker(engine, expire_on_commit=False)
            )
    return factory


@contextmanager
def unit_of_work(url: str, *, pre_ping: bool = True) -> Iterator[Session]:
    """A transaction the caller owns: committed when the block ends normally, rolled back
    when it raises. Without the pre-ping, a pooled connection the server dropped fails
    the first statement instead (for callers that try again anyway)."""
    session = session_factory(url, pre_ping=pre_ping)()
    try:
        with session.begin():
            yield session
    finally:
        session.close()


def read_unit(url: str, read: Callable[[Session], _T]) -> _T:
    """Run `read` in a transaction on a pooled connection without the pre-ping, which
    costs a round trip on every checkout (a large share of a trivial read:
    bench/README.md). A connection the server dropped (a restart) fails its first
    statement instead; the pool then drops it and `read`, which must only read, runs
    once more."""

    def in_transaction(session: Session) -> _T:
        with session.begin():
            return read(session)

    return _again_on_a_dropped_connection(session_factory(url, pre_ping=False), in_transaction)


def one_statement(url: str, work: Callable[[Session], _T]) -> _T:
    """Run `work`, which sends one statement (then perhaps a read), each statement a
    transaction of its own: on PostgreSQL on a pooled autocommit connection without the
    pre-ping, since BEGIN, the ping and COMMIT were three of a one-statement unit of
    work's four round trips (bench/README.md). A connection the server dropped (a restart)
    fails the statement, and `work` runs once more on a fresh one: the failed attempt
    wrote nothing, unless the server went down between its commit and its answer, and then
    the second finds its write done, as a redelivered task would. On SQLite, where `work`
    may send more than one statement, a unit of work."""
    if url.startswith("sqlite"):
        with unit_of_work(url) as session:
            return work(session)
    factory = _autocommit_factories.get(url)
    if factory is None:
        engine = autocommit_engine(url)
        with _lock:
            factory = _autocommit_factories.setdefault(
                url, sessionmaker(engine, expire_on_commit=False)
            )
    return _again_on_a_dropped_connection(factory, work)


def _again_on_a_dropped_connection(
    factory: Callable[[], Session], work: Callable[[Session], _T]
) -> _T:
    """`work` on a new session, and once more on another if the first's connection turned
    out dropped (the pool then discards it); any other error, or a second drop, raises."""
    for attempt in (1, 2):
        session = factory()
        try:
            return work(session)
        except DBAPIError as exc:
            if attempt == 2 or not exc.connection_invalidated:
                raise
        finally:
            session.close()
    raise AssertionError("unreachable")
