"""What the rest of memlane knows of an embedder: its name, what its vectors are good for,
and `embed`. The embedders themselves are plug-ins in memlane.workers.embedders."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
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
    # relevance leans on BM25 instead (pipeline.ranking.scoring.default_lexical_weight).
    lexical: bool
    # Whether a vector, a query's above all, has few non-zero components (hashing: ~15
    # of 256): a working set then stores its vectors by component and a query reads only
    # its own components (pipeline.ranking.corpus.Corpus).
    sparse: bool = False


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


def embed_in_batches(
    texts: Sequence[str],
    *,
    dim: int,
    batch_size: int,
    embed_batch: Callable[[list[str]], Iterable[Sequence[float]]],
    by_length: bool = False,
) -> list[list[float]]:
    """One vector per text, in order: a blank text gets the zero vector (nothing to embed,
    and no call made for it), the others are handed to `embed_batch` `batch_size` at a
    time. `by_length`: texts of similar length share a batch (for a model that pads each
    batch to its longest text)."""
    vectors: list[list[float]] = [[0.0] * dim for _ in texts]
    todo = [i for i, text in enumerate(texts) if text.strip()]
    if by_length:
        todo.sort(key=lambda i: (len(texts[i]), i))
    for start in range(0, len(todo), batch_size):
        batch = todo[start : start + batch_size]
        embedded = embed_batch([texts[i] for i in batch])
        for index, vector in zip(batch, embedded, strict=True):
            vectors[index] = [float(v) for v in vector]
    return vectors


class DenseBatchedEmbedder:
    """What the learned embedders (minilm, e5-multilingual, an API model through litellm)
    share: dense vectors an HNSW index serves well, embedded `_batch_size` texts at a
    time by `embed_in_batches`. A subclass sets `name`, `dim` and `_batch_size` and
    gives `_embed_batch`; `_by_length` for a model that pads a batch to its longest."""

    lexical = False
    name: str
    dim: int
    _batch_size: int
    _by_length = False

    @property
    def capabilities(self) -> EmbedderCapabilities:
        return EmbedderCapabilities(dim=self.dim, ann_helps=True, lexical=False)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return embed_in_batches(
            texts,
            dim=self.dim,
            batch_size=self._batch_size,
            embed_batch=self._embed_batch,
            by_length=self._by_length,
        )

    def _embed_batch(self, texts: list[str]) -> Iterable[Sequence[float]]:
        raise NotImplementedError
