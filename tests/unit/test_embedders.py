from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from functools import partial

import pytest

from memlane.config.settings import load_settings
from memlane.pipeline.errors import ConfigurationError
from memlane.pipeline.ranking import hashing_embedder as hashing_rules
from memlane.pipeline.ranking.embedding import embed_in_batches
from memlane.workers.embedders import (
    HashingEmbedder,
    LiteLLMEmbedder,
    QueryEmbeddingCache,
    get_embedder,
)
from memlane.workers.minilm import MINILM_NAME, MiniLMEmbedder
from tests.defaults import EMBEDDING_DIM

# The settings' defaults, passed as memlane's callers pass the settings.
hashing_embed = partial(hashing_rules.hashing_embed, dim=EMBEDDING_DIM)


class CountingEmbedder:
    """A hand-written fake: returns [len(text), n] and counts the texts it embedded."""

    def __init__(self, name: str = "fake") -> None:
        self.name = name
        self.dim = 2
        self.calls: list[str] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.extend(texts)
        return [[float(len(t)), float(len(self.calls))] for t in texts]


def test_minilm_is_the_default() -> None:
    embedder = get_embedder(load_settings())
    assert isinstance(embedder, MiniLMEmbedder)
    assert (embedder.name, embedder.dim) == (MINILM_NAME, 384)


def test_a_dimension_set_for_the_old_default_names_both_ways_out() -> None:
    # MEMLANE_EMBEDDING_DIM=64 meant hashing when hashing was the default: not silently
    # ignored, and the error says how to keep hashing
    with pytest.raises(ConfigurationError) as caught:
        get_embedder(load_settings(embedding_dim=64))
    assert "unset MEMLANE_EMBEDDING_DIM" in str(caught.value)
    assert "MEMLANE_EMBEDDING_MODEL=hashing" in str(caught.value)


def test_hashing_by_name_uses_the_configured_dimension() -> None:
    embedder = get_embedder(load_settings(embedding_model="hashing", embedding_dim=64))
    assert isinstance(embedder, HashingEmbedder)
    assert (embedder.name, embedder.dim) == ("hashing-64", 64)
    assert embedder.embed(["User likes tea."]) == hashing_embed(["User likes tea."], dim=64)


def test_any_other_name_is_a_litellm_model_with_the_llm_endpoint() -> None:
    settings = load_settings(
        embedding_model="openai/text-embedding-3-small",
        embedding_dim=1536,
        llm_api_base="http://127.0.0.1:9/v1",
        llm_api_key="secret",
    )
    embedder = get_embedder(settings)
    assert isinstance(embedder, LiteLLMEmbedder)
    assert (embedder.name, embedder.dim) == ("openai/text-embedding-3-small", 1536)


def test_litellm_embedder_sends_nothing_for_nothing() -> None:
    embedder = LiteLLMEmbedder("openai/x", api_base=None, api_key=None, timeout_s=1.0, dim=4)
    # no texts, or only blank ones: no call (and no litellm import) is needed
    assert embedder.embed([]) == []
    assert embedder.embed(["", "  "]) == [[0.0] * 4, [0.0] * 4]


def test_importing_the_adapters_does_not_import_litellm() -> None:
    code = (
        "import sys, memlane.workers.embedders, memlane.workers.llm; "
        "print('litellm' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_query_cache_embeds_a_text_once_per_embedder() -> None:
    cache = QueryEmbeddingCache(maxsize=8)
    first, other = CountingEmbedder("one"), CountingEmbedder("two")

    a = cache.get(first, "tea")
    b = cache.get(first, "tea")
    c = cache.get(other, "tea")

    assert a == b == [3.0, 1.0]
    assert c == [3.0, 1.0] and other.calls == ["tea"]
    assert first.calls == ["tea"]
    assert (cache.hits, cache.misses) == (1, 2)


def test_query_cache_evicts_the_least_recently_used() -> None:
    cache = QueryEmbeddingCache(maxsize=2)
    fake = CountingEmbedder()
    cache.get(fake, "a")
    cache.get(fake, "b")
    cache.get(fake, "a")  # "a" is now the most recent
    cache.get(fake, "c")  # evicts "b"

    cache.get(fake, "a")
    cache.get(fake, "b")

    assert fake.calls == ["a", "b", "c", "b"]


def test_query_cache_hands_out_copies() -> None:
    cache = QueryEmbeddingCache()
    fake = CountingEmbedder()
    cache.get(fake, "tea").append(99.0)
    assert cache.get(fake, "tea") == [3.0, 1.0]


def test_the_registry_and_the_settings_name_the_same_built_in_embedders() -> None:
    # config cannot import the registry (tests/unit/test_layers.py): the two lists agree here.
    from memlane.config.settings import BUILT_IN_EMBEDDERS, Settings
    from memlane.workers.embedders.registry import ANY_OTHER, BUILT_IN

    assert tuple(plugin.setting for plugin in BUILT_IN) == BUILT_IN_EMBEDDERS
    assert ANY_OTHER.setting is None
    description = Settings.model_fields["embedding_model"].description or ""
    assert all(name in description for name in BUILT_IN_EMBEDDERS)


def test_each_embedder_declares_what_its_vectors_are_good_for() -> None:
    from memlane.workers.embedders import embedder_for
    from memlane.workers.minilm import MINILM_NAME

    settings = load_settings(embedding_dim=64)
    found = {
        model: embedder_for(model, settings).capabilities
        for model in (
            "hashing",
            "hashing-128",
            "minilm",
            MINILM_NAME,
            "e5-multilingual",
            "openai/text-embedding-3",
        )
    }
    assert {model: (c.dim, c.ann_helps, c.lexical) for model, c in found.items()} == {
        "hashing": (64, False, True),
        "hashing-128": (128, False, True),
        "minilm": (384, True, False),
        MINILM_NAME: (384, True, False),
        "e5-multilingual": (384, True, False),
        "openai/text-embedding-3": (64, True, False),
    }
    for model in found:
        embedder = embedder_for(model, settings)
        assert (embedder.dim, embedder.lexical) == (
            embedder.capabilities.dim,
            embedder.capabilities.lexical,
        )


def test_a_name_no_built_in_claims_goes_to_litellm() -> None:
    from memlane.workers.embedders.registry import ANY_OTHER, plugin_for

    # "hashing-" without digits is no stored hashing name
    assert plugin_for("hashing-x") is ANY_OTHER
    assert plugin_for("hashing-32") is not ANY_OTHER


def test_embed_in_batches_keeps_order_and_makes_no_call_for_blank_texts() -> None:
    calls: list[list[str]] = []

    def embed_batch(batch: list[str]) -> list[list[float]]:
        calls.append(batch)
        return [[float(len(text)), 1.0] for text in batch]

    texts = ["ccc", " ", "a", "bb", ""]
    got = embed_in_batches(texts, dim=2, batch_size=2, embed_batch=embed_batch)
    assert got == [[3.0, 1.0], [0.0, 0.0], [1.0, 1.0], [2.0, 1.0], [0.0, 0.0]]
    assert calls == [["ccc", "a"], ["bb"]]
    calls.clear()
    by_length = embed_in_batches(
        texts, dim=2, batch_size=2, embed_batch=embed_batch, by_length=True
    )
    assert by_length == got  # the same vectors, each in its text's place
    assert calls == [["a", "bb"], ["ccc"]]
    assert embed_in_batches(["", "  "], dim=2, batch_size=2, embed_batch=embed_batch) == [
        [0.0, 0.0],
        [0.0, 0.0],
    ]
    assert calls == [["a", "bb"], ["ccc"]]  # no call for blank texts alone


def test_the_multilingual_embedder_puts_one_fact_in_two_languages_close() -> None:
    from memlane.workers.embedders import embedder_for

    embedder = embedder_for("e5-multilingual", load_settings())
    assert embedder.name == "multilingual-e5-small-q4"
    tea_de, tea_en, tea_zh, cello, blank = embedder.embed(
        [
            "Der Nutzer trinkt jeden Morgen grünen Tee.",
            "User drinks green tea every morning.",
            "用户每天早上喝绿茶。",
            "Der Nutzer spielt Cello in einem Orchester.",
            " ",
        ]
    )

    def cosine(a: list[float], b: list[float]) -> float:
        return sum(x * y for x, y in zip(a, b, strict=True))

    assert abs(cosine(tea_de, tea_de) - 1.0) < 1e-4  # unit vectors
    assert cosine(tea_de, tea_en) > cosine(tea_de, cello)
    assert cosine(tea_zh, tea_en) > cosine(tea_zh, cello)
    assert blank == [0.0] * 384
