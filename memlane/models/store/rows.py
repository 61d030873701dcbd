"""A memory row as memlane's records: the conversions every store module that reads
memories shares (the management reads, the change feed, the working set's load, the
assembler's and dedup's reads). Imports no other store module, so each of them can import
it.

Read for speed: vectors come as the database keeps them (pgvector's binary form through
`vector_send`, SQLite's float32 bytes) straight into numpy.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC
from typing import Any
from typing import cast as cast_

import numpy as np
import numpy.typing as npt
from sqlalchemy import DateTime, LargeBinary, Text, cast, func, type_coerce
from sqlalchemy.orm import Session

from memlane.models.schemas import MemoryPublic
from memlane.models.tables import MemoryRow
from memlane.pipeline.records import MemoryRecord

Vector = npt.NDArray[np.float32]
Vectors = tuple[str, Vector] | None  # (embedder, vector) of an item, or None


def stored_record(fields: dict[str, Any]) -> MemoryRecord:
    """The MemoryRecord of a stored row's fields (its vector left out): what the
    assembler's reads, a working set's load and dedup's candidates build, thousands at a
    time. Validated as any record is: a row no record could hold fails here, loudly,
    and pydantic's validator (Rust) costs less than `model_construct` (a Python loop)."""
    return MemoryRecord.model_validate(fields)


def to_public(row: MemoryRow) -> MemoryPublic:
    return MemoryPublic(
        id=row.id,
        user_id=row.user_id,
        content=row.content,
        category=row.category,  # type: ignore[arg-type]
        importance=row.importance,
        confidence=row.confidence,
        tier=row.tier,  # type: ignore[arg-type]
        status=row.status,  # type: ignore[arg-type]
        sensitive=row.sensitive,
        expires_at=row.expires_at,
        access_count=row.access_count,
        created_at=row.created_at,
        confirmed_at=row.confirmed_at,
        accessed_at=row.accessed_at,
        ref=row.ref,
        source_conversation_id=row.source_conversation_id,
        source_job_id=row.source_job_id,
        language=row.language,
        agent_id=row.agent_id,
        metadata=row.meta,
    )


def vector_column(session: Session, column: Any) -> Any:
    """The column's vectors as raw bytes (see `vector_of`)."""
    if session.get_bind().dialect.name == "postgresql":
        return func.vector_send(column, type_=LargeBinary)
    return type_coerce(column, LargeBinary)


def vector_of(raw: bytes | None, postgres: bool) -> Vector | None:
    """A stored vector's bytes as float32: pgvector's binary form (dimension and a
    reserved field, two big-endian int16, then big-endian float4s) or SQLite's native
    float32 bytes."""
    if raw is None:
        return None
    if postgres:
        return np.frombuffer(raw, dtype=">f4", offset=4).astype(np.float32)
    return np.frombuffer(raw, dtype=np.float32).copy()


# Read as the database returns them, for speed: the keywords as their JSON text (one
# parse for a whole user, `keywords_of`) and the times without the table's UTC type
# (`memory_of` converts them).
_TIMES = ("expires_at", "created_at", "confirmed_at", "accessed_at")
_MEMORY_COLUMNS: tuple[Any, ...] = (
    MemoryRow.id,
    MemoryRow.user_id,
    MemoryRow.content,
    MemoryRow.category,
    MemoryRow.importance,
    MemoryRow.confidence,
    MemoryRow.tier,
    MemoryRow.status,
    MemoryRow.sensitive,
    type_coerce(MemoryRow.expires_at, DateTime(timezone=True)).label("expires_at"),
    type_coerce(cast(MemoryRow.keywords, Text), Text).label("keywords"),
    MemoryRow.access_count,
    *(
        type_coerce(getattr(MemoryRow, name), DateTime(timezone=True)).label(name)
        for name in _TIMES[1:]
    ),
    MemoryRow.ref,
    MemoryRow.source_conversation_id,
    MemoryRow.source_job_id,
    MemoryRow.evidence_seq,
    MemoryRow.agent_id,
    MemoryRow.meta.label("metadata"),
)
_NAMES = [column.key for column in _MEMORY_COLUMNS]
_KEYWORDS = _NAMES.index("keywords")


def memory_columns(postgres: bool) -> list[Any]:
    """What a memory's record and vector are read from, in `memory_of`'s order."""
    vector = (
        func.vector_send(MemoryRow.embedding, type_=LargeBinary)
        if postgres
        else type_coerce(MemoryRow.embedding, LargeBinary)
    )
    return [*_MEMORY_COLUMNS, MemoryRow.embedding_model, vector]


def keywords_of(rows: Sequence[Sequence[Any]]) -> list[frozenset[str]]:
    """The keywords of rows of `memory_columns`, their JSON texts parsed at once."""
    texts = ",".join(row[_KEYWORDS] or "[]" for row in rows)
    return [frozenset(words) for words in json.loads(f"[{texts}]")]


def memory_of(
    row: Sequence[Any], postgres: bool, keywords: frozenset[str] | None = None
) -> tuple[MemoryRecord, str, Vectors]:
    """A row of `memory_columns` as the memory's record (without its vector), its status
    and its (embedder, vector); `keywords` when `keywords_of` has parsed them already."""
    record = memory_record(row, keywords)
    raw, model = cast_(bytes | None, row[-1]), cast_(str | None, row[-2])
    vector = vector_of(raw, postgres)
    return record, record.status, (model, vector) if vector is not None and model else None


def record_columns() -> list[Any]:
    """`memory_columns` without the vector: what `memory_record` reads."""
    return list(_MEMORY_COLUMNS)


def memory_record(row: Sequence[Any], keywords: frozenset[str] | None = None) -> MemoryRecord:
    """A row of `record_columns` (or `memory_columns`) as the memory's record, without
    its vector; `keywords` when `keywords_of` has parsed them already."""
    fields = dict(zip(_NAMES, row, strict=False))
    fields["keywords"] = keywords if keywords is not None else keywords_of([row])[0]
    metadata = fields.get("metadata")
    if metadata is None or isinstance(metadata, str):  # JSON text from a raw SQLite read
        fields["metadata"] = json.loads(metadata or "{}")
    for name in _TIMES:
        when = fields[name]
        if when is not None and when.tzinfo is not UTC:
            fields[name] = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    return stored_record(fields)
