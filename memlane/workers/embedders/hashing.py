"""The `hashing` embedder (chosen by name; minilm is the default):
`memlane.pipeline.ranking.hashing_embedder`, offline, deterministic, no model files.
Lexical: texts that share (stemmed) words are close; it knows no synonyms. Stored as
"hashing-<dim>"."""

from __future__ import annotations

from collections.abc import Sequence

from memlane.config.settings import Settings
from memlane.pipeline.errors import ConfigurationError
from memlane.pipeline.ranking.embedding import EmbedderCapabilities
from memlane.pipeline.ranking.hashing_embedder import hashing_embed
from memlane.workers.embedders.plugin import EmbedderPlugin

PREFIX = "hashing-"


class HashingEmbedder:
    lexical = True

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.name = f"{PREFIX}{dim}"

    @property
    def capabilities(self) -> EmbedderCapabilities:
        # An HNSW graph misses much of the exact top 50 on its sparse vectors
        # (bench/README.md, vector index recall). A text touches a bucket per word and
        # word pair: a query a few of them.
        return EmbedderCapabilities(dim=self.dim, ann_helps=False, lexical=True, sparse=True)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return hashing_embed(texts, dim=self.dim)


def _claims(model: str) -> bool:
    return model == "hashing" or (model.startswith(PREFIX) and model[len(PREFIX) :].isdigit())


def _build(model: str, settings: Settings, dim: int | None) -> HashingEmbedder:
    if model == "hashing":
        return HashingEmbedder(dim or settings.embedding_dim)
    stored_dim = int(model[len(PREFIX) :])
    if dim is not None and dim != stored_dim:
        raise ConfigurationError(f"embedder {model} makes {stored_dim}-dimensional vectors")
    return HashingEmbedder(stored_dim)


PLUGIN = EmbedderPlugin(setting="hashing", claims=_claims, build=_build)
