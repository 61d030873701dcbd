"""Query vectors cached per process: the assembler embeds the same few queries again and
again, and a remote embedder costs a round trip."""

from __future__ import annotations

import threading
from collections import OrderedDict

from memlane.pipeline.ranking.embedding import Embedder


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
