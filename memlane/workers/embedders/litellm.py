"""Any other MEMLANE_EMBEDDING_MODEL: a litellm embedding model string, called in batches,
its vectors MEMLANE_EMBEDDING_DIM long. Stored under the model string."""

from __future__ import annotations

from typing import Any

from memlane.config.settings import Settings
from memlane.pipeline.errors import ConfigurationError
from memlane.pipeline.ranking.embedding import DenseBatchedEmbedder
from memlane.workers.embedders.plugin import EmbedderPlugin
from memlane.workers.llm import load_litellm, translate_litellm_error


class LiteLLMEmbedder(DenseBatchedEmbedder):
    """A litellm embedding model, `batch_size` texts per HTTP request.

    Blank texts are not sent (providers reject them) and get the zero vector. Errors are
    provider errors like the LLM's (TransientProviderError, PermanentProviderError); a
    model whose vectors are not `dim` long is a ConfigurationError.
    """

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


def _build(model: str, settings: Settings, dim: int | None) -> LiteLLMEmbedder:
    api_key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    return LiteLLMEmbedder(
        model,
        api_base=settings.llm_api_base,
        api_key=api_key,
        timeout_s=settings.llm_timeout_s,
        dim=dim or settings.embedding_dim,
    )


PLUGIN = EmbedderPlugin(setting=None, claims=lambda model: True, build=_build)
