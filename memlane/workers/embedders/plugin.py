"""The shape of an embedder plug-in: which names it answers to and how it is built."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from memlane.config.settings import Settings
from memlane.pipeline.ranking.embedding import Embedder


@dataclass(frozen=True)
class EmbedderPlugin:
    # The MEMLANE_EMBEDDING_MODEL value that chooses it (None: the plug-in for any other name).
    setting: str | None
    # True for a setting's value or a stored embedder name ("hashing-256") it builds.
    claims: Callable[[str], bool]
    # (model, settings, dim) → the embedder; dim None: the model's own or the setting's.
    build: Callable[[str, Settings, int | None], Embedder]
