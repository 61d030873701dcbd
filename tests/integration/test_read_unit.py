"""The hot path's read without the pool's pre-ping (memlane.models.db.read_unit), and a
stage's one-statement writes (one_statement): a connection the server dropped costs one
retry, not an error; other errors are not retried."""

from __future__ import annotations

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, ProgrammingError
from sqlalchemy.orm import Session

from memlane.models.db import get_engine, one_statement, read_unit, unit_of_work
from tests.integration.conftest import PG_ADMIN_URL


@pytest.fixture(autouse=True)
def one_pooled_connection(pg: str) -> None:
    """Other tests' threads (the pack writer) share this pool: start each test with it
    empty, so the connection a test kills is the one its next read is handed."""
    get_engine(pg, pre_ping=False).dispose()


def backend_pid(session: Session) -> int:
    return int(session.execute(text("SELECT pg_backend_pid()")).scalar_one())


def test_a_read_survives_its_pooled_connection_being_killed(pg: str) -> None:
    first = read_unit(pg, backend_pid)  # now pooled, idle
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", (first,)).fetchone() == (True,)
    calls: list[int] = []

    def read(session: Session) -> int:
        calls.append(1)
        return backend_pid(session)

    second = read_unit(pg, read)
    assert second != first
    assert len(calls) == 2  # the dead connection's attempt, then a fresh one


def test_other_errors_are_raised_at_once(pg: str) -> None:
    calls: list[int] = []

    def read(session: Session) -> None:
        calls.append(1)
        session.execute(text("SELECT * FROM no_such_table"))

    with pytest.raises(ProgrammingError):
        read_unit(pg, read)
    assert calls == [1]


def test_the_read_engine_does_not_ping(pg: str) -> None:
    assert get_engine(pg, pre_ping=False).pool._pre_ping is False
    assert get_engine(pg).pool._pre_ping is True


def test_one_statement_survives_its_pooled_connection_being_killed(pg: str) -> None:
    first = one_statement(pg, backend_pid)  # now pooled, idle
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", (first,)).fetchone() == (True,)
    calls: list[int] = []

    def work(session: Session) -> int:
        calls.append(1)
        return backend_pid(session)

    assert one_statement(pg, work) != first
    assert len(calls) == 2


def test_one_statement_commits_without_a_transaction_of_its_own(db_url: str) -> None:
    with unit_of_work(db_url) as session:
        session.execute(text("CREATE TABLE one_statement_probe (x integer)"))
    try:
        one_statement(
            db_url, lambda s: s.execute(text("INSERT INTO one_statement_probe VALUES (1)"))
        )
        with unit_of_work(db_url) as session:
            assert session.execute(text("SELECT x FROM one_statement_probe")).all() == [(1,)]
        with pytest.raises(DBAPIError):  # raised at once, not retried
            one_statement(db_url, lambda s: s.execute(text("SELECT * FROM no_such_table")))
    finally:
        with unit_of_work(db_url) as session:
            session.execute(text("DROP TABLE one_statement_probe"))
