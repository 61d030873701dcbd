"""A user's active memories read column by column into a `pipeline.memory_table.MemoryTable`:
what the working set loads a user's memories with (store/user_items.py).

Read for speed, since a user's first assembly waits for it (bench/README.md has the figures):
- no record per row: the table keeps the columns, and a memory's record is built when an
  assembly first reads it;
- times as integer microseconds since the epoch (PostgreSQL's `extract`, exact; SQLite's
  text parsed by numpy at once), so the score's epoch seconds are one division, the
  value `datetime.timestamp()` gives;
- the vectors of the embedder asked for decoded in one numpy call over their bytes
  joined (pgvector's binary form, SQLite's float32 bytes);
- the keywords' JSON texts parsed in one call, and kept as the lists they parse to;
- the rows unsorted by the database (its sort of a large user's rows, vectors and all,
  spilled to disk and took longer than the read), sorted by id here, in Python's order of
  strings.
"""

from __future__ import annotations

import json
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
    select,
    type_coerce,
)
from sqlalchemy.orm import Session

from memlane.models.pipelined import CompiledRead, compile_read
from memlane.models.store.memories import stored_record
from memlane.models.tables import MemoryRow
from memlane.pipeline.line_bound import runs
from memlane.pipeline.memory_table import MemoryTable
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
        MemoryRow.embedding_model,
        vector,
    ]


def _active(postgres: bool) -> Any:
    return select(*_columns(postgres)).where(
        MemoryRow.user_id == bindparam("user_id"), MemoryRow.status == "active"
    )


@lru_cache(maxsize=1)
def _active_read() -> CompiledRead:
    return compile_read(_active(True))


def _rows(session: Session, user_id: str, postgres: bool) -> list[tuple[Any, ...]]:
    """The rows, in no order. On PostgreSQL on the session's own psycopg connection (its
    transaction) in the binary protocol: vectors come as bytes instead of hex text, and
    the rows skip SQLAlchemy's result machinery; on SQLite on its own connection too."""
    driver: Any = session.connection().connection.driver_connection
    if postgres:
        read = _active_read()
        with driver.cursor(binary=True) as cursor:
            cursor.execute(read.sql, {**read.params, "user_id": user_id})
            rows: list[tuple[Any, ...]] = cursor.fetchall()
        return rows
    compiled = _active(False).compile(dialect=session.get_bind().dialect)
    given = {**compiled.params, "user_id": user_id}
    params = [given[name] for name in compiled.positiontup or ()]
    cursor = driver.cursor()
    try:
        return list(cursor.execute(compiled.string, params).fetchall())
    finally:
        cursor.close()


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
        return block.astype(np.float32), mask  # one copy, native and writable
    matrix = np.zeros((n, dim), dtype=np.float32)
    matrix[mask] = block
    return matrix, mask


def read(
    session: Session, user_id: str, *, model: str, dim: int
) -> tuple[MemoryTable, list[str | None]]:
    """The user's active memories in id order, with their vectors of `model` (of `dim`),
    and the embedder of each one's stored vector (None: no vector)."""
    postgres = session.get_bind().dialect.name == "postgresql"
    rows = sorted(_rows(session, user_id, postgres), key=itemgetter(0))
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
        models,
        raws,
    ) = zip(*rows, strict=True) if rows else ((),) * len(_columns(postgres))
    keywords: list[list[str]] = json.loads(f"[{','.join(t or '[]' for t in keyword_texts)}]")
    expires, created, confirmed, accessed = (
        _micros(values, postgres) for values in (expires_at, created_at, confirmed_at, accessed_at)
    )
    vectors, with_vectors = _vectors(models, raws, postgres, model=model, dim=dim)

    def record(row: int) -> MemoryRecord:
        return stored_record(
            {
                "id": ids[row],
                "user_id": user_id,
                "content": contents[row],
                "category": categories[row],
                "importance": importance[row],
                "confidence": confidence[row],
                "tier": tiers[row],
                "status": "active",
                "sensitive": bool(sensitive[row]),
                "expires_at": _time(expires[row]),
                "keywords": frozenset(keywords[row]),
                "access_count": access_counts[row],
                "created_at": _time(created[row]),
                "confirmed_at": _time(confirmed[row]),
                "accessed_at": _time(accessed[row]),
                "ref": refs[row],
                "source_conversation_id": conversations[row],
                "source_job_id": jobs[row],
                "evidence_seq": evidence[row],
            }
        )

    def column(values: Sequence[Any]) -> npt.NDArray[np.float64]:
        return np.array(values, dtype=np.float64).reshape(len(rows))

    table = MemoryTable(
        ids=tuple(ids),
        keywords=keywords,
        vectors=vectors,
        with_vectors=with_vectors,
        importance=column(importance),
        confidence=column(confidence),
        stated=_seconds(confirmed),
        created=_seconds(created),
        expires=_seconds(expires),
        confirmations=column(access_counts),
        sensitive=np.array(sensitive, dtype=np.bool_).reshape(len(rows)),
        free=np.fromiter((tier == "candidate" for tier in tiers), np.bool_, len(rows)),
        chars=np.fromiter(map(len, contents), np.float64, len(rows)),
        runs=np.fromiter(map(runs, contents), np.float64, len(rows)),
        record=record,
    )
    stored = [of if of and raw is not None else None for of, raw in zip(models, raws, strict=True)]
    return table, stored
