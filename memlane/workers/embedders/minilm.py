"""The `minilm` embedder (the default): all-MiniLM-L6-v2 (384 dims) on onnxruntime, local
(`memlane.workers.minilm`; its packages come with `memlane[embedded]`). Semantic: "car" is
close to "automobile". Stored as "minilm-l6-v2-int8"."""

from __future__ import annotations

from memlane.config.settings import Settings
from memlane.pipeline.errors import ConfigurationError
from memlane.workers.embedders.plugin import EmbedderPlugin
from memlane.workers.minilm import MINILM_DIM, MINILM_NAME, MiniLMEmbedder


def _claims(model: str) -> bool:
    return model in ("minilm", MINILM_NAME)


def _build(model: str, settings: Settings, dim: int | None) -> MiniLMEmbedder:
    if dim is not None and dim != MINILM_DIM and "embedding_model" not in settings.model_fields_set:
        # A dimension set for hashing when it was the default: say both ways out.
        raise ConfigurationError(
            f"MEMLANE_EMBEDDING_DIM is {dim}, but the default embedder, minilm, makes "
            f"{MINILM_DIM}-dimensional vectors: unset MEMLANE_EMBEDDING_DIM, or set "
            "MEMLANE_EMBEDDING_MODEL=hashing to keep the lexical embedder at that dimension"
        )
    if dim is not None and dim != MINILM_DIM:
        raise ConfigurationError(
            f"MEMLANE_EMBEDDING_MODEL=minilm makes {MINILM_DIM}-dimensional vectors; "
            f"MEMLANE_EMBEDDING_DIM is {dim} (unset it or set it to {MINILM_DIM})"
        )
    return MiniLMEmbedder()


PLUGIN = EmbedderPlugin(setting="minilm", claims=_claims, build=_build)
