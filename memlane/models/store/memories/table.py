"""A user's active memories read column by column into a
`pipeline.ranking.memory_table.MemoryTable`: what the working set loads a user's memories
with (store/users/items.py).

Read for speed, since a user's first assembly waits for it (bench/README.md has the figures):
- on SQLite the columns in one row of aggregates (store/memories/columns.py), a row per
  memory only where that read declines;
- no record per row: the table keeps the columns a record needs, and a memory's record
  is built when an assembly first reads it;
- times as integer microseconds since the epoch (PostgreSQL's `extract`, exact; SQLite's
  text parsed by numpy at once), so the score's epoch seconds are one division, the
  value `datetime.timestamp()` gives;
- the vectors of the embedder asked for decoded in one numpy call over their bytes
  joined (pgvector's binary form, SQLite's float32 bytes);
- the keywords' JSON texts parsed in one call, each row's kept as a tuple: the collector
  stops looking at a tuple of strings after its first pass, while it walks every list
  on each collection of the whole heap, for as long as the view lives;
- the rows unsorted by the database (its sort of a large user's rows, vectors and all,
  spilled to disk and took longer than the read), sorted by id here, in Python's order of
  strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from operator import itemgetter
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import (
    BigInteger,
    LargeBinary,
    String,
    Text,
    bindparam,
    cast,
    extract,
    func,
    or_,
    select,
    type_coerce,
)
from sqlalchemy.dialects import sqlite
from sqlalchemy.orm import Session

from memlane.models.pipelined import CompiledRead, compile_read
from memlane.models.store.memories.columns import MemoryColumns, parse_keywords, sqlite_columns
from memlane.models.store.rows import stored_record
from memlane.models.tables import MemoryRow
from memlane.pipeline.assembly.line_bound import runs_of
from memlane.pipeline.ranking.memory_table import LineFields, MemoryTable
from memlane.pipeline.records import MemoryRecord

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NEVER = np.iinfo(np.int64).min  # numpy's NaT: no time (a memory that never expires)
Micros = npt.NDArray[np.int64]


def _micros_column(column: Any, postgres: bool) -> Any:
    if postgres:
        return cast(extract("epoch", column) * 1_000_000, BigInteger)
    return type_coerce(column, String)


def _columns(postgres: bool) -> list[Any]:
    """What a row holds, in `_table`'s order."""
    vector = (
        func.vector_send(MemoryRow.embedding, type_=LargeBinary)
        if postgres
        else type_coerce(MemoryRow.embedding, LargeBinary)
    )
    return [
        MemoryRow.id,
        MemoryRow.content,
        MemoryRow.category,
        MemoryRow.importance,
        MemoryRow.confidence,
        MemoryRow.tier,
        MemoryRow.sensitive,
        _micros_column(MemoryRow.expires_at, postgres),
        type_coerce(cast(MemoryRow.keywords, Text), Text),
        MemoryRow.access_count,
        _micros_column(MemoryRow.created_at, postgres),
        _micros_column(MemoryRow.confirmed_at, postgres),
        _micros_column(MemoryRow.accessed_at, postgres),
        MemoryRow.ref,
        MemoryRow.source_conversation_id,
        MemoryRow.source_job_id,
        MemoryRow.evidence_seq,
        MemoryRow.agent_id,
        MemoryRow.embedding_model,
        vector,
    ]


def _active(postgres: bool) -> Any:
    return select(*_columns(postgres)).where(
        MemoryRow.user_id == bindparam("user_id"),
        MemoryRow.status == "active",
        # what an agent's read sees (pipeline.scope): NULL, no agent, matches none
        or_(MemoryRow.agent_id.is_(None), MemoryRow.agent_id == bindparam("agent_id")),
    )


@lru_cache(maxsize=1)
def _active_read() -> CompiledRead:
    return compile_read(_active(True))


@lru_cache(maxsize=1)
def _sqlite_read() -> tuple[str, tuple[str, ...], dict[str, Any]]:
    """The SQLite statement, its parameters' order and their fixed values."""
    compiled = _active(False).compile(dialect=sqlite.dialect())
    return compiled.string, tuple(compiled.positiontup or ()), dict(compiled.params)


def _rows(
    session: Session, user_id: str, postgres: bool, agent_id: str | None
) -> list[tuple[Any, ...]]:
    """The rows, in no order. On PostgreSQL on the session's own psycopg connection (its
    transaction) in the binary protocol: vectors come as bytes instead of hex text, and
    the rows skip SQLAlchemy's result machinery; on SQLite on its own connection too."""
    driver: Any = session.connection().connection.driver_connection
    if postgres:
        read = _active_read()
        with driver.cursor(binary=True) as cursor:
            cursor.execute(read.sql, {**read.params, "user_id": user_id, "agent_id": agent_id})
            rows: list[tuple[Any, ...]] = cursor.fetchall()
        return rows
    sql, order, fixed = _sqlite_read()
    given = {**fixed, "user_id": user_id, "agent_id": agent_id}
    cursor = driver.cursor()
    try:
        return list(cursor.execute(sql, [given[name] for name in order]).fetchall())
    finally:
        cursor.close()


def _parse(texts: Sequence[str | None]) -> list[list[str]]:
    """The rows' keyword lists from their JSON texts, in one parse."""
    return parse_keywords(f"[{','.join(text or '[]' for text in texts)}]")


def _micros(values: Sequence[Any], postgres: bool) -> Micros:
    if postgres:
        never = _NEVER
        return np.fromiter(
            (never if value is None else value for value in values), np.int64, len(values)
        )
    return np.array(values, dtype="datetime64[us]").view(np.int64)


def _seconds(micros: Micros) -> npt.NDArray[np.float64]:
    """Epoch seconds, +inf for no time: microseconds / 10**6 correctly rounded, as
    `datetime.timestamp()` computes it."""
    return np.where(micros == _NEVER, np.inf, micros / 1e6)


def _stored_time(value: Any, postgres: bool) -> datetime | None:
    """A time as `_columns` reads it, one at a time: microseconds on PostgreSQL,
    SQLite's text (UTC, as SQLAlchemy writes it) there."""
    if value is None or postgres:
        return _time(_NEVER if value is None else value)
    when = datetime.fromisoformat(value)
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def _time(micros: Any) -> datetime | None:
    return None if micros == _NEVER else _EPOCH + timedelta(microseconds=int(micros))


def _vectors(
    models: Sequence[str | None],
    raws: Sequence[bytes | None],
    postgres: bool,
    *,
    model: str,
    dim: int,
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.bool_]]:
    """The rows' vectors of `model` and `dim` (zeros for the others), and which rows have
    one. pgvector's binary form leads each vector with its dimension and a reserved
    field (two int16s: one float4's room), then big-endian float4s."""
    n = len(raws)
    lead = 1 if postgres else 0
    size = 4 * (dim + lead)
    mask = np.fromiter(
        (
            of == model and raw is not None and len(raw) == size
            for of, raw in zip(models, raws, strict=True)
        ),
        np.bool_,
        n,
    )
    if not dim or not mask.any():
        return np.zeros((n, dim), dtype=np.float32), mask
    every = bool(mask.all())
    chosen = raws if every else [raw for raw, ok in zip(raws, mask, strict=True) if ok]
    joined = b"".join(chosen)  # type: ignore[arg-type]  # None only where not chosen
    block = np.frombuffer(joined, dtype=">f4" if postgres else np.float32)
    block = block.reshape(-1, dim + lead)[:, lead:]
    if every:
        # one copy, native and writable, in numpy's memory: it asks a large array's
        # pages to be huge ones, and a query's scan of a 10k × 256 matrix in a bytes
        # object's memory was ~18% slower
        return block.astype(np.float32), mask
    matrix = np.zeros((n, dim), dtype=np.float32)
    matrix[mask] = block
    return matrix, mask


def _row_columns(
    session: Session,
    user_id: str,
    postgres: bool,
    *,
    model: str,
    dim: int,
    agent_id: str | None = None,
) -> MemoryColumns:
    """The columns from the rows, a row per memory."""
    rows = sorted(_rows(session, user_id, postgres, agent_id), key=itemgetter(0))
    (
        ids,
        contents,
        categories,
        importance,
        confidence,
        tiers,
        sensitive,
        expires_at,
        keyword_texts,
        access_counts,
        created_at,
        confirmed_at,
        accessed_at,
        refs,
        conversations,
        jobs,
        evidence,
        agents,
        models,
        raws,
    ) = zip(*rows, strict=True) if rows else ((),) * len(_columns(postgres))
    vectors, with_vectors = _vectors(models, raws, postgres, model=model, dim=dim)
    return MemoryColumns(
        ids=ids,
        contents=contents,
        categories=categories,
        importance=importance,
        confidence=confidence,
        tiers=tiers,
        sensitive=sensitive,
        expires_at=expires_at,
        keywords=_parse(keyword_texts),
        access_counts=access_counts,
        created_at=created_at,
        confirmed_at=confirmed_at,
        accessed_at=accessed_at,
        refs=refs,
        conversations=conversations,
        jobs=jobs,
        evidence=evidence,
        agents=agents,
        stored=[
            of if of and raw is not None else None for of, raw in zip(models, raws, strict=True)
        ],
        vectors=vectors,
        with_vectors=with_vectors,
    )


def read_columns(
    session: Session, user_id: str, *, model: str, dim: int, agent_id: str | None = None
) -> MemoryColumns:
    """The user's active memories `agent_id` sees (None: the shared ones; pipeline.scope)
    column by column: on SQLite in one row of aggregates
    (store/memories/columns.py) unless that read declines, else a row per memory."""
    postgres = session.get_bind().dialect.name == "postgresql"
    if not postgres:
        driver: Any = session.connection().connection.driver_connection
        columns = sqlite_columns(driver, user_id, model=model, dim=dim, agent_id=agent_id)
        if columns is not None:
            return columns
    return _row_columns(session, user_id, postgres, model=model, dim=dim, agent_id=agent_id)


def read(
    session: Session, user_id: str, *, model: str, dim: int, agent_id: str | None = None
) -> tuple[MemoryTable, list[str | None]]:
    """The user's active memories `agent_id` sees in id order, with their vectors of
    `model` (of `dim`), and the embedder of each one's stored vector (None: no vector)."""
    postgres = session.get_bind().dialect.name == "postgresql"
    columns = read_columns(session, user_id, model=model, dim=dim, agent_id=agent_id)
    return table_of(columns, user_id, postgres)


def table_of(
    columns: MemoryColumns, user_id: str, postgres: bool
) -> tuple[MemoryTable, list[str | None]]:
    """The table of `columns` (and their stored vectors' embedders)."""
    n = len(columns.ids)

    def column(values: Sequence[Any], dtype: Any = np.float64) -> npt.NDArray[Any]:
        return np.array(values, dtype=dtype).reshape(n)

    keywords: list[tuple[str, ...]] = list(map(tuple, columns.keywords))
    expires, created, confirmed = (
        _micros(values, postgres)
        for values in (columns.expires_at, columns.created_at, columns.confirmed_at)
    )
    importance, confidence = column(columns.importance), column(columns.confidence)
    sensitive = column(columns.sensitive, np.bool_)
    counts, refs = column(columns.access_counts, np.int64), column(columns.refs, np.int64)
    # What a record needs beyond the arrays, and only that, is kept: every container the
    # view keeps is walked by the collector's next young collection, which the first
    # assembly pays (~10 ms at 10k). A record reads the arrays' values with `item`, as
    # Python's own floats, ints and bools (numpy's scalars cost more than the record);
    # accessed_at, which ranking does not read, is parsed only when a record is built.
    ids, contents, categories, tiers = (
        columns.ids,
        columns.contents,
        columns.categories,
        columns.tiers,
    )
    accessed_at, conversations = columns.accessed_at, columns.conversations
    jobs, evidence, agents = columns.jobs, columns.evidence, columns.agents

    def record(row: int) -> MemoryRecord:
        return stored_record(
            {
                "id": ids[row],
                "user_id": user_id,
                "content": contents[row],
                "category": categories[row],
                "importance": importance.item(row),
                "confidence": confidence.item(row),
                "tier": tiers[row],
                "status": "active",
                "sensitive": sensitive.item(row),
                "expires_at": _time(expires.item(row)),
                "keywords": frozenset(keywords[row]),
                "access_count": counts.item(row),
                "created_at": _time(created.item(row)),
                "confirmed_at": _time(confirmed.item(row)),
                "accessed_at": _stored_time(accessed_at[row], postgres),
                "ref": refs.item(row),
                "source_conversation_id": conversations[row],
                "source_job_id": jobs[row],
                "evidence_seq": evidence[row],
                "agent_id": agents[row],
            }
        )

    def line_fields(row: int) -> LineFields:
        # what a memory's line shows, without its record (pipeline.assembly.exact_walk)
        created_at = _time(created.item(row))
        assert created_at is not None  # a stored memory always has one
        return refs.item(row), ids[row], importance.item(row), created_at, contents[row]

    table = MemoryTable(
        ids=tuple(ids),
        keywords=keywords,
        vectors=columns.vectors,
        with_vectors=columns.with_vectors,
        importance=importance,
        confidence=confidence,
        stated=_seconds(confirmed),
        created=_seconds(created),
        expires=_seconds(expires),
        confirmations=counts.astype(np.float64),
        sensitive=sensitive,
        free=np.fromiter((tier == "candidate" for tier in tiers), np.bool_, n),
        chars=np.fromiter(map(len, contents), np.float64, n),
        runs=runs_of(contents),
        refs=refs.astype(np.float64),
        record=record,
        line_fields=line_fields,
    )
    return table, list(columns.stored)
