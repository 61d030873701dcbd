"""Real services for integration tests: a PostgreSQL database migrated once per session and
emptied between tests, a SQLite file per test (a copy of one migrated once per session),
and Redis."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import redis
from alembic.util.exc import CommandError
from sqlalchemy import text
from sqlalchemy.orm import Session

from memlane.config.settings import load_settings
from memlane.models import migrate
from memlane.models.db import get_engine, unit_of_work
from memlane.models.store.memories import vector_index
from memlane.models.tables import Base
from memlane.service.facade import Memlane
from tests import scratch

PG_ADMIN_URL = scratch.ADMIN_URL
PG_DB = scratch.scratch().pg_db
PG_URL = scratch.scratch().pg_url
REDIS_URL = scratch.scratch().redis_url


def _ensure_database(*, again: bool = False) -> None:
    try:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5) as conn:
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (PG_DB,)
            ).fetchone()
            if exists and again:
                conn.execute(f'DROP DATABASE "{PG_DB}" WITH (FORCE)')
            if not exists or again:
                conn.execute(f'CREATE DATABASE "{PG_DB}"')
    except psycopg.OperationalError as exc:  # fail loudly, never skip
        pytest.fail(
            f"PostgreSQL is not reachable at {PG_ADMIN_URL} ({exc}); run scripts/test.sh, "
            "which starts it and installs pgvector",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def pg_url() -> str:
    _ensure_database()
    try:
        migrate.upgrade(PG_URL)
    except CommandError:
        # at a revision this checkout does not know: a run of another branch's code (in
        # another worktree, on the same base name) left it; the slot's lock says no run
        # of this base name and slot is using it now
        get_engine(PG_URL).dispose()
        _ensure_database(again=True)
        migrate.upgrade(PG_URL)
    return PG_URL


def _truncate(url: str) -> None:
    """Empty every table, and drop the HNSW indexes made at run time
    (models/store/memories/vector_index.py)."""
    tables = ", ".join(t.name for t in reversed(Base.metadata.sorted_tables))
    indexes = vector_index.hnsw_indexes(get_engine(url))
    with get_engine(url).begin() as conn:
        conn.execute(text(f"TRUNCATE {tables} CASCADE"))
        for name in indexes:
            conn.execute(text(f'DROP INDEX "{name}"'))


@pytest.fixture
def pg(pg_url: str) -> Iterator[str]:
    """A migrated, empty PostgreSQL database URL."""
    _truncate(pg_url)
    yield pg_url


@pytest.fixture(scope="session")
def _migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file at the head revision. Migrating costs 1–2 s of CPU a file; the copy
    is the same schema, alembic_version included, in milliseconds."""
    path = tmp_path_factory.mktemp("sqlite-template") / "memlane.db"
    migrate.upgrade(f"sqlite:///{path}")
    get_engine(f"sqlite:///{path}").dispose()
    return path


@pytest.fixture
def sqlite_url(tmp_path: Path, _migrated_sqlite: Path) -> str:
    target = tmp_path / "memlane.db"
    # sqlite3's backup copies a consistent database whatever its WAL holds
    with sqlite3.connect(_migrated_sqlite) as source, sqlite3.connect(target) as copy:
        source.backup(copy)
    source.close()
    copy.close()
    return f"sqlite:///{target}"


@pytest.fixture(params=["postgresql", "sqlite"])
def db_url(request: pytest.FixtureRequest) -> str:
    """Runs a test on both backends."""
    if request.param == "postgresql":
        return str(request.getfixturevalue("pg"))
    return str(request.getfixturevalue("sqlite_url"))


@pytest.fixture
def session(db_url: str) -> Iterator[Session]:
    with unit_of_work(db_url) as s:
        yield s


@pytest.fixture
def redis_url() -> Iterator[str]:
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.ConnectionError as exc:
        pytest.fail(
            f"Redis is not reachable at {REDIS_URL} ({exc}); run scripts/test.sh", pytrace=False
        )
    client.flushdb()
    yield REDIS_URL
    client.flushdb()


@pytest.fixture
def lane(db_url: str) -> Iterator[Memlane]:
    """A facade on the test database (modules needing other settings define their own)."""
    with Memlane(load_settings(database_url=db_url)) as lane:
        yield lane
