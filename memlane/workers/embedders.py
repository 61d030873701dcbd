"""Embedders: text → vectors of a fixed dimension, chosen by MEMLANE_EMBEDDING_MODEL.

- "hashing" (default): `memlane.pipeline.hashing_embedder`, offline, deterministic, no model files.
  Lexical: texts that share (stemmed) words are close; it knows no synonyms.
- "minilm": all-MiniLM-L6-v2 (384 dims) on onnxruntime, local (`memlane.workers.minilm`; the
  optional extra `memlane[minilm]`). Semantic: "car" is close to "automobile".
- anything else: a litellm embedding model string, called in batches.

Each vector is stored with its embedder's `name` ("hashing-256", "minilm-l6-v2-int8", the
litellm model) and dimension; `embedder_for` rebuilds an embedder from either a setting's
value or a stored name, which is how the assembler embeds a query for memories that a
`memlane reembed` has not moved yet.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol

from memlane.config.settings import Settings
from memlane.pipeline.errors import ConfigurationError
from memlane.pipeline.hashing_embedder import hashing_embed
from memlane.workers.llm import load_litellm, translate_litellm_error
from memlane.workers.minilm import MINILM_DIM, MINILM_NAME, MiniLMEmbedder


class Embedder(Protocol):
    # Stored next to each vector: vectors of different names are never compared.
    name: str
    dim: int
    # True when the cosine of its vectors is itself a word-overlap signal (hashing), so
    # relevance leans on BM25 instead (pipeline.scoring.default_lexical_weight).
    lexical: bool

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector of length `dim` per text, in order."""
        ...


class HashingEmbedder:
    lexical = True

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.name = f"hashing-{dim}"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return hashing_embed(texts, dim=self.dim)


class LiteLLMEmbedder:
    """A litellm embedding model, `batch_size` texts per HTTP request.

    Blank texts are not sent (providers reject them) and get the zero vector. Errors are
    sorted like the LLM's: TransientLLMError, PermanentLLMError; a model whose vectors are
    not `dim` long is a ConfigurationError.
    """

    lexical = False

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None,
        api_key: str | None,
        timeout_s: float,
        dim: int,
        batch_size: int = 64,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.name = model
        self.dim = dim
        self._api_base = api_base
        self._api_key = api_key
        self._timeout_s = timeout_s
        self._batch_size = batch_size

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = [[0.0] * self.dim for _ in texts]
        todo = [i for i, text in enumerate(texts) if text.strip()]
        for start in range(0, len(todo), self._batch_size):
            batch = todo[start : start + self._batch_size]
            embedded = self._embed_batch([texts[i] for i in batch])
            for index, vector in zip(batch, embedded, strict=True):
                vectors[index] = vector
        return vectors

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        litellm = load_litellm()
        try:
            response = litellm.embedding(
                model=self.name,
                input=texts,
                api_base=self._api_base,
                api_key=self._api_key,
                timeout=self._timeout_s,
                max_retries=0,
            )
        except Exception as exc:
            error = translate_litellm_error(exc, model=self.name)
            if error is None:
                raise
            raise error from exc
        items = sorted(response.data, key=lambda item: int(_field(item, "index")))
        vectors = [[float(v) for v in _field(item, "embedding")] for item in items]
        if len(vectors) != len(texts):
            raise ConfigurationError(
                f"embedding model {self.name} returned {len(vectors)} vectors "
                f"for {len(texts)} texts"
            )
        for vector in vectors:
            if len(vector) != self.dim:
                raise ConfigurationError(
                    f"embedding model {self.name} returns {len(vector)}-dimensional vectors; "
                    f"set MEMLANE_EMBEDDING_DIM={len(vector)}"
                )
        return vectors


def _field(item: Any, name: str) -> Any:
    return item[name] if isinstance(item, dict) else getattr(item, name)


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
    if model == "hashing":
        return HashingEmbedder(dim or settings.embedding_dim)
    if model.startswith("hashing-") and model[len("hashing-") :].isdigit():
        stored_dim = int(model[len("hashing-") :])
        if dim is not None and dim != stored_dim:
            raise ConfigurationError(f"embedder {model} makes {stored_dim}-dimensional vectors")
        return HashingEmbedder(stored_dim)
    if model in ("minilm", MINILM_NAME):
        if dim is not None and dim != MINILM_DIM:
            raise ConfigurationError(
                f"MEMLANE_EMBEDDING_MODEL=minilm makes {MINILM_DIM}-dimensional vectors; "
                f"MEMLANE_EMBEDDING_DIM is {dim} (unset it or set it to {MINILM_DIM})"
            )
        return MiniLMEmbedder()
    api_key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    return LiteLLMEmbedder(
        model,
        api_base=settings.llm_api_base,
        api_key=api_key,
        timeout_s=settings.llm_timeout_s,
        dim=dim or settings.embedding_dim,
    )


class QueryEmbeddingCache:
    """A process-local LRU of query vectors keyed by (embedder name, text): the assembler
    embeds the same few queries again and again, and a remote embedder costs a round trip.
    Thread-safe; vectors are returned as fresh lists so callers cannot corrupt the cache."""

    def __init__(self, maxsize: int = 1024) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be >= 1, got {maxsize}")
        self.maxsize = maxsize
        self.hits = 0
        self.misses = 0
        self._items: OrderedDict[tuple[str, str], tuple[float, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, embedder: Embedder, text: str) -> list[float]:
        key = (embedder.name, text)
        with self._lock:
            cached = self._items.get(key)
            if cached is not None:
                self._items.move_to_end(key)
                self.hits += 1
                return list(cached)
        # Embed outside the lock: a slow remote call must not block other queries.
        vector = tuple(embedder.embed([text])[0])
        with self._lock:
            self.misses += 1
            self._items[key] = vector
            self._items.move_to_end(key)
            while len(self._items) > self.maxsize:
                self._items.popitem(last=False)
        return list(vector)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.hits = self.misses = 0


_QUERY_CACHE = QueryEmbeddingCache()


def embed_query(embedder: Embedder, text: str) -> list[float]:
    """The query's vector, from the process-wide cache when this text was embedded before."""
    return _QUERY_CACHE.get(embedder, text)
