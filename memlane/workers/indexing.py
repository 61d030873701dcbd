"""HNSW indexes for users who have become large (models/store/memories/vector_index.py), built by
the worker that made them large: after a store, after a re-embedding's swap."""

from __future__ import annotations

import logging

from memlane.config.settings import Settings
from memlane.models.db import get_engine
from memlane.models.store.memories import vector_index
from memlane.pipeline.ranking.embedding import EmbedderCapabilities

log = logging.getLogger("memlane.worker")


def index_if_large(
    settings: Settings, user_id: str, model: str, capabilities: EmbedderCapabilities
) -> str | None:
    """The user's HNSW index of (model, its dimension) once they have `hnsw_min_memories` memories
    of it, built when missing; None when there is none (SQLite, a small user, an embedder
    the policy keeps exact, or a build that failed: logged, never the job's failure, as
    the index only makes reads faster)."""
    if not settings.is_postgres or not vector_index.wants_hnsw(settings.vector_index, capabilities):
        return None
    try:
        names = vector_index.ensure_for_users(
            get_engine(settings.resolved_database_url),
            [user_id],
            model,
            capabilities.dim,
            settings.hnsw_min_memories,
        )
    except Exception:
        log.exception("could not build the HNSW index of user %s (%s)", user_id, model)
        return None
    return names[0] if names else None
