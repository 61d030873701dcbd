"""Re-embedding one user's memories with another embedder: the body of the Celery task
`memlane.reembed_user` and of the in-process worker's equivalent.

The protocol (fill `embedding_next*` page by page, then swap in one UPDATE when the
user's set is complete) is described in models/store/memories/reembed.py. Each page is read in
one short transaction, embedded outside any, and written in another, so a slow
embedding API holds no lock and no connection.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from memlane.config.settings import Settings
from memlane.models.db import unit_of_work
from memlane.models.store.memories import reembed
from memlane.pipeline.errors import ConfigurationError
from memlane.workers.embedders import Embedder, embedder_for
from memlane.workers.indexing import index_if_large

log = logging.getLogger("memlane.reembed")

PAGE_SIZE = 64
# New memories inserted between the last page and the swap need another page; with the
# target as MEMLANE_EMBEDDING_MODEL none are, so two rounds are the most a user needs.
MAX_ROUNDS = 5


@dataclass(frozen=True, slots=True)
class ReembedOutcome:
    user_id: str
    embedded: int  # vectors computed by this run
    swapped: int | None  # vectors moved into service; None: the set never became complete


def target_embedder(model: str, dim: int, settings: Settings) -> Embedder:
    """The embedder a run was started for, checked to make what was asked."""
    embedder = embedder_for(model, settings, dim=dim)
    if (embedder.name, embedder.dim) != (model, dim):
        raise ConfigurationError(
            f"re-embedding target {model} ({dim} dims) resolves to {embedder.name} "
            f"({embedder.dim} dims)"
        )
    return embedder


def run_reembed_user(
    user_id: str, model: str, dim: int, settings: Settings, *, page_size: int = PAGE_SIZE
) -> ReembedOutcome:
    """Embed the user's memories that lack a (model, dim) vector, then swap them into
    service. Idempotent: a finished user costs two small queries. Embedding errors
    (TransientProviderError, PermanentProviderError) propagate; what was embedded before
    them stays parked and is not embedded again."""
    embedder = target_embedder(model, dim, settings)
    url = settings.resolved_database_url
    embedded = 0
    for _ in range(MAX_ROUNDS):
        while True:
            with unit_of_work(url) as session:
                page = reembed.pending_batch(
                    session, user_id, model=model, dim=dim, limit=page_size
                )
            if not page:
                break
            vectors = embedder.embed([content for _, content in page])
            if any(len(vector) != dim for vector in vectors):
                # A vector of another length would stay "pending" forever.
                raise ConfigurationError(f"{model} returned vectors that are not {dim} long")
            ids = [memory_id for memory_id, _ in page]
            with unit_of_work(url) as session:
                reembed.save_next(
                    session, user_id, dict(zip(ids, vectors, strict=True)), model=model
                )
            embedded += len(page)
        with unit_of_work(url) as session:
            swapped = reembed.swap_if_complete(session, user_id, model=model, dim=dim)
        if swapped is not None:
            log.info("user %s now serves %s: %d vectors swapped", user_id, model, swapped)
            index_if_large(settings, user_id, model, embedder.capabilities)
            return ReembedOutcome(user_id, embedded, swapped)
    log.warning(
        "user %s: memories kept arriving with another embedder; set MEMLANE_EMBEDDING_MODEL "
        "to the target and run memlane reembed again",
        user_id,
    )
    return ReembedOutcome(user_id, embedded, None)
