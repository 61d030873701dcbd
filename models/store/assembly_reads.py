"""The assembler's reads: the few index-backed queries behind one context.

One round trip on PostgreSQL: pinned and verified items, the vector top-k against the
query (exact per-user scan through `ix_memories_user_status`; pgvector computes the
cosine), and the best by the chosen strategy, as one UNION ALL. Embeddings never leave
the database on this path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from pgvector.sqlalchemy import Vector
from sqlalchemy import ColumnElement, bindparam, false, literal, or_, select, union_all
from sqlalchemy.orm import Session

from models.schemas import MemoryRecord
from models.tables import MemoryRow

_COLUMNS = (
    MemoryRow.id,
    MemoryRow.user_id,
    MemoryRow.content,
    MemoryRow.category,
    MemoryRow.importance,
    MemoryRow.confidence,
    MemoryRow.tier,
    MemoryRow.status,
    MemoryRow.sensitive,
    MemoryRow.expires_at,
    MemoryRow.access_count,
    MemoryRow.created_at,
    MemoryRow.accessed_at,
)


@dataclass(frozen=True, slots=True)
class AssemblyCandidates:
    memories: list[MemoryRecord]
    relevance: dict[str, float]
    retrieval_mode: str


def _visible(user_id: str, now: datetime, include_sensitive: bool) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = [
        MemoryRow.user_id == user_id,
        MemoryRow.status == "active",
        or_(MemoryRow.expires_at.is_(None), MemoryRow.expires_at > now),
    ]
    if not include_sensitive:
        conditions.append(MemoryRow.sensitive == false())
    return conditions


def _strategy_orders(strategy: str) -> list[Any]:
    if strategy == "recent":
        return [MemoryRow.accessed_at.desc()]
    if strategy == "important":
        return [MemoryRow.importance.desc()]
    if strategy == "balanced":
        # importance / (1 + age) is not index-friendly; its best lie among the most
        # important and the newest.
        return [MemoryRow.importance.desc(), MemoryRow.created_at.desc()]
    return [MemoryRow.importance.desc(), MemoryRow.accessed_at.desc()]


def _record(row: Any) -> MemoryRecord:
    # Rows come from memlane's own schema; validating them again would double the
    # hot path's cost for nothing.
    return MemoryRecord.model_construct(
        id=row.id,
        user_id=row.user_id,
        content=row.content,
        category=row.category,
        importance=row.importance,
        confidence=row.confidence,
        tier=row.tier,
        status=row.status,
        sensitive=row.sensitive,
        expires_at=row.expires_at,
        keywords=frozenset(),
        access_count=row.access_count,
        created_at=row.created_at,
        accessed_at=row.accessed_at,
        embedding=None,
        source_conversation_id=None,
        source_job_id=None,
        evidence_seq=None,
    )


def assembly_candidates(
    session: Session,
    user_id: str,
    *,
    now: datetime,
    strategy: str,
    query_embedding: Sequence[float] | None,
    top_k: int,
    include_sensitive: bool = False,
) -> AssemblyCandidates:
    visible = _visible(user_id, now, include_sensitive)
    postgres = session.get_bind().dialect.name == "postgresql"
    use_vector = query_embedding is not None and len(query_embedding) > 0
    dim = len(query_embedding) if query_embedding is not None else 0

    if postgres and use_vector:
        q = bindparam("q", value=list(query_embedding or ()), type_=Vector())
        similarity: Any = 1 - MemoryRow.embedding.op("<=>", return_type=MemoryRow.importance.type)(
            q
        )
        relevance_col = similarity.label("relevance")
    else:
        relevance_col = literal(None).label("relevance")

    def part(*conditions: Any) -> Any:
        return select(*_COLUMNS, relevance_col).where(*visible, *conditions)

    parts: list[Any] = [part(MemoryRow.tier.in_(("pinned", "verified")))]
    for order in _strategy_orders(strategy):
        parts.append(part().order_by(order, MemoryRow.id).limit(top_k).subquery().select())
    if postgres and use_vector:
        parts.append(
            part(MemoryRow.embedding_dim == dim)
            .order_by(MemoryRow.embedding.op("<=>")(q), MemoryRow.id)
            .limit(top_k)
            .subquery()
            .select()
        )
    rows = session.execute(union_all(*parts)).all()

    memories: dict[str, MemoryRecord] = {}
    relevance: dict[str, float] = {}
    for row in rows:
        if row.id not in memories:
            memories[row.id] = _record(row)
        if row.relevance is not None:
            relevance[row.id] = max(0.0, min(1.0, float(row.relevance)))

    mode = f"index:{strategy}"
    if use_vector:
        if postgres:
            mode = f"pgvector-exact+{mode}"
        else:
            mode = f"numpy-cosine+{mode}"
            _sqlite_vector_top_k(
                session, visible, query_embedding or (), top_k, memories, relevance
            )
    return AssemblyCandidates(
        memories=sorted(memories.values(), key=lambda m: m.id),
        relevance=relevance,
        retrieval_mode=mode,
    )


def _sqlite_vector_top_k(
    session: Session,
    visible: list[ColumnElement[bool]],
    query_embedding: Sequence[float],
    top_k: int,
    memories: dict[str, MemoryRecord],
    relevance: dict[str, float],
) -> None:
    """SQLite has no vector index here (sqlite-vec cannot load on this Python), so the
    embedded default computes cosines in numpy over the user's visible vectors."""
    dim = len(query_embedding)
    rows = session.execute(
        select(MemoryRow.id, MemoryRow.embedding).where(*visible, MemoryRow.embedding_dim == dim)
    ).all()
    if not rows:
        return
    ids = [row.id for row in rows]
    matrix = np.asarray([row.embedding for row in rows], dtype=np.float32)
    query = np.asarray(query_embedding, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(query) or 1.0)
    norms[norms == 0] = 1.0
    sims = np.clip(matrix @ query / norms, 0.0, 1.0)
    order = sorted(range(len(ids)), key=lambda i: (-float(sims[i]), ids[i]))[:top_k]
    wanted = [ids[i] for i in order if ids[i] not in memories]
    if wanted:
        for row in session.execute(select(*_COLUMNS).where(MemoryRow.id.in_(wanted))).all():
            memories[row.id] = _record(row)
    for i in range(len(ids)):
        if ids[i] in memories:
            relevance[ids[i]] = float(sims[i])
