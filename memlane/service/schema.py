"""`memlane db upgrade`: the database migrated to the latest schema and, on PostgreSQL,
the configured embedder's HNSW indexes built for every user large enough to want one
(MEMLANE_VECTOR_INDEX, default auto: every embedder but hashing)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.engine import make_url

from memlane.config.settings import Settings
from memlane.models import migrate
from memlane.models.db import get_engine
from memlane.models.store.memories import vector_index
from memlane.workers.embedders import get_embedder


@dataclass(frozen=True, slots=True)
class Upgraded:
    """What `upgrade` did: the database (its password hidden), the revision it was at
    (None: empty) and is at now, and how many HNSW indexes serve (None: none wanted)."""

    database: str
    from_revision: str | None
    revision: str | None
    vector_indexes: int | None = None


def upgrade(settings: Settings, *, say: Callable[[str], None]) -> Upgraded:
    """Migrate the settings' database, then build the missing HNSW indexes; `say` hears
    each step as it happens (an index build can take minutes)."""
    url = settings.resolved_database_url
    before = migrate.current_revision(url)
    migrate.upgrade(url)
    after = migrate.current_revision(url)
    where = make_url(url).render_as_string(hide_password=True)
    change = "already at" if before == after else f"upgraded from {before or 'empty'} to"
    say(f"{where}: {change} revision {after}")
    embedder = get_embedder(settings)
    if settings.is_postgres and vector_index.wants_hnsw(
        settings.vector_index, embedder.capabilities
    ):
        engine = get_engine(url)
        users = vector_index.large_users(
            engine, embedder.name, embedder.dim, settings.hnsw_min_memories
        )
        say(
            f"HNSW indexes of {embedder.name}: {len(users)} user(s) with at least "
            f"{settings.hnsw_min_memories:,} memories; building the missing ones …"
        )
        built = [vector_index.ensure_hnsw(engine, u, embedder.name, embedder.dim) for u in users]
        ready = sum(name is not None for name in built)
        say(f"vector indexes: {ready} ready")
        return Upgraded(where, before, after, ready)
    return Upgraded(where, before, after)
