"""Embedders: text → vectors of a fixed dimension, chosen by MEMLANE_EMBEDDING_MODEL.

Each is a plug-in, one module here (hashing, minilm, litellm for any other name), listed
in `registry`; the protocol and the capability record the store and the scorer read are
in memlane.pipeline.ranking.embedding.

Each vector is stored with its embedder's `name` ("hashing-256", "minilm-l6-v2-int8", the
litellm model) and dimension; `embedder_for` rebuilds an embedder from either a setting's
value or a stored name, which is how the assembler embeds a query for memories that a
`memlane reembed` has not moved yet.
"""

from __future__ import annotations

from memlane.config.settings import Settings
from memlane.pipeline.ranking.embedding import Embedder, EmbedderCapabilities
from memlane.workers.embedders.hashing import HashingEmbedder
from memlane.workers.embedders.litellm import LiteLLMEmbedder
from memlane.workers.embedders.query_cache import QueryEmbeddingCache, embed_query
from memlane.workers.embedders.registry import plugin_for

__all__ = [
    "Embedder",
    "EmbedderCapabilities",
    "HashingEmbedder",
    "LiteLLMEmbedder",
    "QueryEmbeddingCache",
    "embed_query",
    "embedder_for",
    "get_embedder",
]


def get_embedder(settings: Settings) -> Embedder:
    """The embedder MEMLANE_EMBEDDING_MODEL names (vectors MEMLANE_EMBEDDING_DIM long; for
    minilm the dimension is the model's, 384, and a different explicit one is an error)."""
    explicit_dim = "embedding_dim" in settings.model_fields_set
    return embedder_for(
        settings.embedding_model,
        settings,
        dim=settings.embedding_dim if explicit_dim else None,
    )


def embedder_for(model: str, settings: Settings, *, dim: int | None = None) -> Embedder:
    """The embedder for a setting's value ("hashing", "minilm", a litellm model) or for a
    stored embedder name ("hashing-256", "minilm-l6-v2-int8"). `dim` None: the model's own
    dimension (hashing, minilm) or MEMLANE_EMBEDDING_DIM (litellm)."""
    return plugin_for(model).build(model, settings, dim)
