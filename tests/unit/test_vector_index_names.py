"""The HNSW index policy and names (models/store/memories/vector_index.py); building them is
tested on PostgreSQL in tests/integration/test_vector_index.py."""

from __future__ import annotations

import re

import pytest

from memlane.config.settings import load_settings
from memlane.models.store.memories.vector_index import index_name, wants_hnsw
from memlane.workers.embedders import embedder_for


@pytest.mark.parametrize(
    ("policy", "model", "expected"),
    [
        ("auto", "hashing-256", False),
        ("auto", "minilm-l6-v2-int8", True),
        ("auto", "text-embedding-3-small", True),
        ("hnsw", "hashing-256", True),
        ("exact", "minilm-l6-v2-int8", False),
    ],
)
def test_policy(policy: str, model: str, expected: bool) -> None:
    # The store decides from the capabilities the embedder's plug-in declares.
    capabilities = embedder_for(model, load_settings(), dim=None).capabilities
    assert wants_hnsw(policy, capabilities) is expected


def test_names_are_valid_short_identifiers_distinct_per_user_model_and_dimension() -> None:
    long_model = "azure/" + "very-long-deployment-name-" * 5
    names = {
        index_name("u1", "minilm-l6-v2-int8", 384),
        index_name("u2", "minilm-l6-v2-int8", 384),
        index_name("u1", "minilm-l6-v2-int8", 256),
        index_name("u1", "Minilm-L6-v2-int8", 384),  # a different stored name
        index_name("u1" * 100, long_model, 1536),
        index_name("o'brien", "it's/a model", 8),
    }
    assert len(names) == 6
    for name in names:
        assert len(name.encode()) <= 63
        assert re.fullmatch(r"ix_memories_hnsw_[0-9a-f]{32}", name)
    assert index_name("u1", "minilm-l6-v2-int8", 384) == index_name("u1", "minilm-l6-v2-int8", 384)
