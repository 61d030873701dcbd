"""The local all-MiniLM-L6-v2 embedder (the default; its packages come with the extras that
embed, and scripts/bootstrap.sh installs them).

Reference similarities are sentence-transformers' published ones for all-MiniLM-L6-v2
(0.6660, 0.1046, 0.1411 in its README); memlane's int8 ONNX run must land within 0.01.
"""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from memlane.config.settings import load_settings
from memlane.pipeline.errors import ConfigurationError
from memlane.workers.embedders import embedder_for, get_embedder
from memlane.workers.minilm import (
    MINILM_DIM,
    MINILM_NAME,
    MiniLMEmbedder,
    mean_pool,
    missing_packages,
)


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


def cos(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_similarities_match_the_published_ones(minilm: MiniLMEmbedder) -> None:
    weather, sunny, stadium = minilm.embed(
        ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
    )
    assert cos(weather, sunny) == pytest.approx(0.6660, abs=0.01)
    assert cos(weather, stadium) == pytest.approx(0.1046, abs=0.01)
    assert cos(sunny, stadium) == pytest.approx(0.1411, abs=0.01)


def test_paraphrases_are_close_and_unrelated_texts_are_not(minilm: MiniLMEmbedder) -> None:
    food, bread, car, automobile = minilm.embed(
        [
            "A man is eating food.",
            "A man is eating a piece of bread.",
            "The user drives an old car.",
            "The user owns a vintage automobile.",
        ]
    )
    assert cos(food, bread) > 0.7
    assert cos(car, automobile) > 0.5  # no shared content word: hashing would give ~0
    assert cos(food, car) < 0.2


def test_vectors_are_unit_length_384_long_and_in_input_order(minilm: MiniLMEmbedder) -> None:
    texts = ["short", "a much longer sentence about the user's migration to PostgreSQL", "tea"]
    vectors = minilm.embed(texts)
    assert [len(v) for v in vectors] == [MINILM_DIM] * 3
    assert all(math.isclose(float(np.linalg.norm(v)), 1.0, abs_tol=1e-5) for v in vectors)
    one_by_one = [minilm.embed([t])[0] for t in texts]
    for batched, alone in zip(vectors, one_by_one, strict=True):
        # padding to the longest text of a batch must not change anyone's vector
        assert cos(batched, alone) > 0.99999


def test_blank_texts_get_the_zero_vector_without_loading_anything() -> None:
    assert MiniLMEmbedder().embed(["", "  \n"]) == [[0.0] * MINILM_DIM] * 2
    assert MiniLMEmbedder().embed([]) == []


def test_long_texts_are_truncated_not_refused(minilm: MiniLMEmbedder) -> None:
    long = "The user keeps notes about every deployment. " * 200  # ~1,800 tokens
    (vector,) = minilm.embed([long])
    (head,) = minilm.embed(["The user keeps notes about every deployment. " * 30])
    assert cos(vector, head) > 0.99  # both read as their first 256 tokens


def test_mean_pool_ignores_padding_and_normalises() -> None:
    hidden = np.array([[[3.0, 4.0], [100.0, 100.0]]], dtype=np.float32)
    mask = np.array([[1, 0]])
    assert mean_pool(hidden, mask).tolist() == [[pytest.approx(0.6), pytest.approx(0.8)]]
    two = np.array([[[1.0, 0.0], [0.0, 1.0]]], dtype=np.float32)
    assert mean_pool(two, np.array([[1, 1]])).tolist() == [
        [pytest.approx(math.sqrt(0.5)), pytest.approx(math.sqrt(0.5))]
    ]


def test_the_setting_selects_minilm_with_its_own_dimension() -> None:
    embedder = get_embedder(load_settings(embedding_model="minilm"))
    assert isinstance(embedder, MiniLMEmbedder)
    assert (embedder.name, embedder.dim) == (MINILM_NAME, 384)
    # an explicit dimension that is not the model's is a configuration error, not a
    # silent mismatch with the stored vectors
    with pytest.raises(ConfigurationError, match="384-dimensional"):
        get_embedder(load_settings(embedding_model="minilm", embedding_dim=256))
    assert get_embedder(load_settings(embedding_model="minilm", embedding_dim=384)).dim == 384


def test_stored_names_rebuild_their_embedders() -> None:
    settings = load_settings()
    assert isinstance(embedder_for(MINILM_NAME, settings), MiniLMEmbedder)
    hashing = embedder_for("hashing-64", settings)
    assert (hashing.name, hashing.dim) == ("hashing-64", 64)
    with pytest.raises(ConfigurationError):
        embedder_for("hashing-64", settings, dim=128)


def test_without_the_extra_the_default_fails_at_once_and_says_what_to_install() -> None:
    # a process without onnxruntime (sys.modules None: how Python marks a module absent)
    code = (
        "import sys; sys.modules['onnxruntime'] = None\n"
        "from memlane.config.settings import load_settings\n"
        "from memlane.workers.embedders import get_embedder\n"
        "from memlane.pipeline.errors import ConfigurationError\n"
        "try:\n"
        "    get_embedder(load_settings())\n"
        "except ConfigurationError as exc:\n"
        "    print(exc)\n"
        "else:\n"
        "    print('built')\n"
        "print(type(get_embedder(load_settings(embedding_model='hashing'))).__name__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    # when the embedder is made, not at some later memory's embedding; no fallback
    error, hashing = out.strip().splitlines()
    assert "onnxruntime" in error and 'pip install "memlane[embedded]"' in error
    assert "MEMLANE_EMBEDDING_MODEL=hashing" in error
    assert hashing == "HashingEmbedder"  # the way out the message names works


def test_the_packages_it_needs_are_found_here() -> None:
    assert missing_packages() == []
