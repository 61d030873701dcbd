"""The embedders memlane knows. Adding one: a module in this folder defining a PLUGIN
(memlane.workers.embedders.plugin), one line below, and its setting's value in
config.settings.BUILT_IN_EMBEDDERS (config imports nothing of the project, so it cannot
read this list; tests/unit/test_embedders.py checks the two agree)."""

from __future__ import annotations

from memlane.workers.embedders import e5, hashing, litellm, minilm
from memlane.workers.embedders.plugin import EmbedderPlugin

BUILT_IN: tuple[EmbedderPlugin, ...] = (
    hashing.PLUGIN,
    minilm.PLUGIN,
    e5.PLUGIN,
)
# Any name no built-in one claims is a litellm embedding model.
ANY_OTHER = litellm.PLUGIN


def plugin_for(model: str) -> EmbedderPlugin:
    """The plug-in that builds `model` (a setting's value or a stored embedder name)."""
    return next((plugin for plugin in BUILT_IN if plugin.claims(model)), ANY_OTHER)
