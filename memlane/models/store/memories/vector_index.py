"""HNSW indexes for the assembler's vector top-k: one per large user and embedder
(PostgreSQL only).

Why per user: every vector read is filtered to one user. An index over everyone's
vectors walks a graph where that user's are a small share (slow even at 10k of 111k
rows: bench/README.md), and a user with 0.1% of a big table would hardly be served at
all. pgvector's advice for a filter with few values is a partial
index per value; memlane gives one to each user with at least
`MEMLANE_HNSW_MIN_MEMORIES` memories (2,000 by default), and reads the vectors of the
others exactly, which at that size costs about as much as an index search.

`memories.embedding` holds vectors of any dimension (a `memlane reembed` moves users from
one embedder to another) and pgvector can only index one dimension, so the index is on an
expression, also partial on the embedder:

    CREATE INDEX ix_memories_hnsw_<digest> ON memories
        USING hnsw ((embedding::vector(<dim>)) vector_cosine_ops)
        WHERE user_id = '<user>' AND embedding_model = '<model>' AND embedding_dim = <dim>

The vector read (models/store/reads/assembly.py) orders by exactly that expression under
exactly those conditions, with their values inlined as literals so the planner can prove
the predicate under any plan. Iterative index scans (pgvector 0.8, set on every
connection by models/db.py) keep the other filters (status, expiry) from leaving the
top-k short.

Not for every embedder: on the sparse vectors of the `hashing` embedder an HNSW graph
misses much of the exact top 50 (bench/README.md), so `auto` keeps those exact; each
embedder says which it is (`EmbedderCapabilities.ann_helps`).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable

from sqlalchemy import Engine, func, select, text

from memlane.models.tables import MemoryRow
from memlane.pipeline.ranking.embedding import EmbedderCapabilities

log = logging.getLogger("memlane.store")

# pgvector's HNSW indexes `vector` up to 2,000 dimensions.
MAX_HNSW_DIM = 2000
PREFIX = "ix_memories_hnsw_"


def wants_hnsw(policy: str, capabilities: EmbedderCapabilities) -> bool:
    """`hnsw`: always; `exact`: never; `auto`: for the embedders an approximate index
    helps (not `hashing`, whose sparse vectors an HNSW graph navigates poorly)."""
    if policy == "hnsw":
        return True
    if policy == "exact":
        return False
    return capabilities.ann_helps


def index_name(user_id: str, model: str, dim: int) -> str:
    """A valid, stable identifier (at most 63 bytes) for (user, model, dim)."""
    digest = hashlib.sha256(f"{user_id}\0{model}\0{dim}".encode()).hexdigest()[:32]
    return f"{PREFIX}{digest}"


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _exists(engine: Engine, name: str) -> bool | None:
    """True: a valid index; False: an invalid one (a failed concurrent build); None."""
    with engine.connect() as conn:
        valid = conn.execute(
            text(
                "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "WHERE c.relname = :name"
            ),
            {"name": name},
        ).scalar()
    return None if valid is None else bool(valid)


def ensure_hnsw(engine: Engine, user_id: str, model: str, dim: int) -> str | None:
    """Create the user's HNSW index of (model, dim) unless it exists; its name, or None
    when the database is not PostgreSQL or the dimension is beyond pgvector's limit.

    Built CONCURRENTLY, so the user's writers go on meanwhile (seconds to tens of
    seconds: bench/README.md); a build that failed half-way leaves an invalid index,
    which is dropped and built again."""
    if engine.dialect.name != "postgresql":
        return None
    if dim > MAX_HNSW_DIM:
        log.warning(
            "no HNSW index for %s: %d dimensions is over pgvector's limit of %d; "
            "its vector reads stay exact",
            model,
            dim,
            MAX_HNSW_DIM,
        )
        return None
    name = index_name(user_id, model, dim)
    if _exists(engine, name):
        return name
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        # Two store workers of one user may get here at once; one builds, the other
        # goes on without waiting (its user's reads are exact a little longer).
        key = int(name[len(PREFIX) : len(PREFIX) + 15], 16)
        if not conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar():
            return None
        try:
            if _exists(engine, name) is False:
                conn.execute(text(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"'))
            conn.execute(
                text(
                    f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{name}" ON memories '
                    f"USING hnsw ((embedding::vector({int(dim)})) vector_cosine_ops) "
                    f"WHERE user_id = {_literal(user_id)} "
                    f"AND embedding_model = {_literal(model)} AND embedding_dim = {int(dim)}"
                )
            )
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
    log.info("HNSW index %s ready: user %s, %s (%d dimensions)", name, user_id, model, dim)
    return name


def large_users(engine: Engine, model: str, dim: int, min_memories: int) -> list[str]:
    """Users with at least `min_memories` active memories of (model, dim)."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(MemoryRow.user_id)
            .where(
                MemoryRow.status == "active",
                MemoryRow.embedding_model == model,
                MemoryRow.embedding_dim == dim,
            )
            .group_by(MemoryRow.user_id)
            .having(func.count() >= min_memories)
            .order_by(MemoryRow.user_id)
        )
        return list(rows.scalars())


def ensure_for_users(
    engine: Engine, user_ids: Iterable[str], model: str, dim: int, min_memories: int
) -> list[str]:
    """The HNSW indexes of those of `user_ids` that have reached `min_memories` memories
    of (model, dim), built where missing (PostgreSQL; [] elsewhere)."""
    if engine.dialect.name != "postgresql":
        return []
    names = []
    for user_id in user_ids:
        if _exists(engine, index_name(user_id, model, dim)):
            names.append(index_name(user_id, model, dim))
            continue
        with engine.connect() as conn:
            count = conn.execute(
                select(func.count())
                .select_from(MemoryRow)
                .where(
                    MemoryRow.user_id == user_id,
                    MemoryRow.status == "active",
                    MemoryRow.embedding_model == model,
                    MemoryRow.embedding_dim == dim,
                )
            ).scalar_one()
        if count >= min_memories:
            name = ensure_hnsw(engine, user_id, model, dim)
            if name is not None:
                names.append(name)
    return names


def hnsw_indexes(engine: Engine) -> list[str]:
    """The names of the HNSW indexes on memories (PostgreSQL; [] elsewhere)."""
    if engine.dialect.name != "postgresql":
        return []
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT indexname FROM pg_indexes WHERE tablename = 'memories' "
                "AND indexname LIKE :prefix ORDER BY indexname"
            ),
            {"prefix": PREFIX + "%"},
        )
        return list(rows.scalars())
