"""The assembler's read on PostgreSQL: SQLAlchemy statements, compiled once, run in one
network round trip on a pooled psycopg connection.

A Session costs the hot path more than its reads do: BEGIN and COMMIT are two round
trips of their own, and executing through the ORM and its result rows adds more (ten
times the trivial read itself: bench/README.md). Here the connection is in autocommit
and the statements are sent in one pipeline with one Sync, which PostgreSQL runs as one
implicit transaction: one snapshot, no BEGIN or COMMIT, one round trip. psycopg prepares
a statement it has run five times on a connection and keeps the 100 most recent, so
planning is paid once per connection and SQL text while that text stays among them (the
assembler's candidates statement has the user in its text: see
models/store/reads/assembly.py).

Statements are SQLAlchemy's own, compiled for psycopg; parameters marked
`literal_execute` (which the planner must see as constants, e.g. to use a partial
index) are rendered as SQL literals by SQLAlchemy's literal processors.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.dialects import postgresql
from sqlalchemy.exc import OperationalError

_DIALECT = postgresql.psycopg.dialect()  # type: ignore[no-untyped-call]
_POSTCOMPILE = re.compile(r"__\[POSTCOMPILE_(\w+)\]")


@dataclass(frozen=True, slots=True)
class CompiledRead:
    """A statement as psycopg takes it: SQL text and the parameter values the statement
    carries itself (those given per call are merged over them)."""

    sql: str
    params: Mapping[str, Any]


def compile_read(statement: Any, literals: Mapping[str, Any] | None = None) -> CompiledRead:
    """`statement` for psycopg, with each post-compile parameter (`literal_execute`, or
    an IN list) rendered as literals: its value from `literals`, else its own."""
    compiled = statement.compile(dialect=_DIALECT)
    given = dict(literals or {})

    def render(match: re.Match[str]) -> str:
        name = match.group(1)
        bind = compiled.binds[name]
        value = given.get(name, bind.effective_value)
        if value is None:
            raise ValueError(f"no value for the literal parameter {name!r}")
        render_one = bind.type.literal_processor(_DIALECT)
        values = value if isinstance(value, list | tuple) else [value]
        return ", ".join(render_one(v) for v in values)

    own = {
        key: value
        for key, value in compiled.params.items()
        if value is not None and key not in compiled.post_compile_params
    }
    return CompiledRead(sql=_POSTCOMPILE.sub(render, compiled.string), params=own)


Result = tuple[list[str], list[tuple[Any, ...]]]


def run_reads(
    engine: Engine, reads: Sequence[tuple[CompiledRead, Mapping[str, Any]]]
) -> list[Result]:
    """Run `reads` (each with its per-call parameters) in one round trip and one
    snapshot, on `engine`'s autocommit connections (`memlane.models.db.autocommit_engine`);
    each result is (column names, rows). A pooled connection the server has
    dropped (a restart) fails its first read; it is replaced and the reads run again.
    A database that stays away is SQLAlchemy's OperationalError, as the ORM's reads
    raise it: every door maps it alike (503 database_unavailable, a task's retry)."""
    # Here, not at the top: the SQLite-only install (no `postgres` extra) imports this
    # module's compiled statements but never runs them.
    import psycopg

    try:
        return _run_reads(engine, reads)
    except psycopg.OperationalError as exc:
        raise OperationalError(None, None, exc) from exc


def _run_reads(
    engine: Engine, reads: Sequence[tuple[CompiledRead, Mapping[str, Any]]]
) -> list[Result]:
    for attempt in (1, 2):
        pooled = engine.raw_connection()
        try:
            conn: Any = pooled.driver_connection
            cursors = []
            if len(reads) == 1:
                # one statement is one round trip without a pipeline, whose entry, Sync
                # and exit cost the client more than the read (a working set's poll)
                [(read, params)] = reads
                cursors.append(conn.cursor())
                cursors[0].execute(read.sql, {**read.params, **params})
            else:
                # Leaving the block sends the one Sync and reads every result (a sync of
                # our own inside it would be a second round trip).
                with conn.pipeline():
                    for read, params in reads:
                        cursor = conn.cursor()
                        cursor.execute(read.sql, {**read.params, **params})
                        cursors.append(cursor)
            return [
                ([column.name for column in cursor.description], cursor.fetchall())
                for cursor in cursors
            ]
        except Exception as exc:
            broken = bool(getattr(pooled.driver_connection, "broken", False))
            if broken:
                pooled.invalidate(exc)
            if attempt == 2 or not broken:
                raise
        finally:
            pooled.close()
    raise AssertionError("unreachable")
