"""HNSW indexes for the assembler's vector top-k, one per embedder (PostgreSQL only).

`memories.embedding` holds vectors of any dimension (a `memlane reembed` moves users from
one embedder to another), and pgvector can only index a column of one dimension. So each
embedder gets a partial expression index, as pgvector's README advises for mixed
dimensions:

    CREATE INDEX ix_memories_hnsw_<model>_<dim> ON memories
        USING hnsw ((embedding::vector(<dim>)) vector_cosine_ops)
        WHERE embedding_model = '<model>' AND embedding_dim = <dim>

and the vector read (models/store/assembly_reads.py) orders by exactly that expression
under exactly that condition, with the model and dimension inlined as literals so the
planner can prove the predicate. The planner then picks the index or, for a user with few
memories, the exact per-user scan. Iterative index scans (pgvector 0.8,
`hnsw.iterative_scan`, set on every connection by models/db.py) keep filtered searches
from coming back short.

Not for every embedder: on the sparse vectors of the `hashing` embedder an HNSW graph
finds only 55–72% of the exact top 50 (bench/README.md), so `auto` keeps those exact.
"""

from __future__ import annotations

import hashlib
import logging
import re

from sqlalchemy import Engine, text

log = logging.getLogger("memlane.store")

# pgvector's HNSW indexes `vector` up to 2,000 dimensions.
MAX_HNSW_DIM = 2000
_IDENT = re.compile(r"[^a-z0-9]+")


def wants_hnsw(policy: str, model: str) -> bool:
    """`hnsw`: always; `exact`: never; `auto`: for every embedder but `hashing`, whose
    sparse vectors an HNSW graph navigates poorly."""
    if policy == "hnsw":
        return True
    if policy == "exact":
        return False
    return not model.startswith("hashing-")


def index_name(model: str, dim: int) -> str:
    """A valid, stable identifier of at most 63 bytes for (model, dim)."""
    slug = _IDENT.sub("_", model.lower()).strip("_")[:30]
    digest = hashlib.sha1(f"{model}\0{dim}".encode()).hexdigest()[:8]
    return f"ix_memories_hnsw_{slug}_{dim}_{digest}"


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def ensure_hnsw(engine: Engine, model: str, dim: int) -> str | None:
    """Create the HNSW index of (model, dim) unless it exists; its name, or None when
    the database is not PostgreSQL or the dimension is beyond pgvector's HNSW limit.

    Built CONCURRENTLY, so writers go on while it builds (about 40 s for 100k vectors of
    256 dimensions on 2 cores); a build that failed half-way leaves an invalid index,
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
    name = index_name(model, dim)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        valid = conn.execute(
            text(
                "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "WHERE c.relname = :name"
            ),
            {"name": name},
        ).scalar()
        if valid:
            return name
        if valid is False:
            conn.execute(text(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"'))
        conn.execute(
            text(
                f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{name}" ON memories '
                f"USING hnsw ((embedding::vector({int(dim)})) vector_cosine_ops) "
                f"WHERE embedding_model = {_literal(model)} AND embedding_dim = {int(dim)}"
            )
        )
    log.info("HNSW index %s ready for %s (%d dimensions)", name, model, dim)
    return name


def hnsw_indexes(engine: Engine) -> list[str]:
    """The names of the HNSW indexes on memories (PostgreSQL; [] elsewhere)."""
    if engine.dialect.name != "postgresql":
        return []
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT indexname FROM pg_indexes WHERE tablename = 'memories' "
                "AND indexname LIKE 'ix_memories_hnsw_%' ORDER BY indexname"
            )
        )
        return list(rows.scalars())
