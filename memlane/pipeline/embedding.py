"""What the rest of memlane knows of an embedder: its name, what its vectors are good for,
and `embed`. The embedders themselves are plug-ins in memlane.workers.embedders."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class EmbedderCapabilities:
    """What an embedder's vectors are like, for the parts that choose how to read them."""

    # The length of every vector it makes.
    dim: int
    # Whether an approximate (HNSW) index finds its nearest neighbours well: not for the
    # sparse vectors of the hashing embedder (bench/README.md), which stay read exactly.
    ann_helps: bool
    # Whether the cosine of its vectors is itself a word-overlap signal (hashing), so
    # relevance leans on BM25 instead (pipeline.scoring.default_lexical_weight).
    lexical: bool


class Embedder(Protocol):
    # Stored next to each vector: vectors of different names are never compared.
    name: str

    @property
    def capabilities(self) -> EmbedderCapabilities: ...

    @property
    def dim(self) -> int: ...

    @property
    def lexical(self) -> bool: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector of length `dim` per text, in order."""
        ...
