from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from functools import partial

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memlane.pipeline.ranking import hashing_embedder as hashing_rules
from memlane.pipeline.ranking.hashing_embedder import stemmed_tokens
from tests.defaults import EMBEDDING_DIM

# The settings' defaults, passed as memlane's callers pass the settings.
hashing_embed = partial(hashing_rules.hashing_embed, dim=EMBEDDING_DIM)


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


TEXTS = [
    "The user prefers TypeScript over JavaScript for frontend projects.",
    "Deploys run on Fridays after the QA sign-off.",
]


def test_tokens_are_lowercased_stemmed_and_free_of_stopwords() -> None:
    assert stemmed_tokens("The user is Running the deployments!") == ["user", "run", "deploy"]


def test_same_vectors_in_another_process_with_another_hash_seed() -> None:
    script = (
        "import json, sys\n"
        "from memlane.pipeline.ranking.hashing_embedder import hashing_embed\n"
        "print(json.dumps(hashing_embed(json.loads(sys.argv[1]), dim=64)))\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", script, json.dumps(TEXTS)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert json.loads(out) == hashing_embed(TEXTS, dim=64)


def test_vectors_have_the_asked_dimension_and_unit_norm() -> None:
    for dim in (8, 256, 1000):
        for vector in hashing_embed(TEXTS, dim=dim):
            assert len(vector) == dim
            assert math.sqrt(sum(v * v for v in vector)) == pytest.approx(1.0)


def test_text_without_content_words_is_the_zero_vector() -> None:
    assert hashing_embed(["", "the and of", "!!!"], dim=16) == [[0.0] * 16] * 3


def test_related_texts_are_closer_than_unrelated_ones() -> None:
    query, related, unrelated = hashing_embed(
        [
            "Which language does the user prefer for the frontend?",
            "The user prefers TypeScript for frontend code.",
            "Deploys run on Fridays after the QA sign-off.",
        ]
    )
    assert cosine(query, related) > 0.3
    assert cosine(query, related) > cosine(query, unrelated) + 0.2


def test_inflections_share_a_vector() -> None:
    a, b = hashing_embed(["deploying services", "deployed service"])
    assert cosine(a, b) == pytest.approx(1.0)


def test_word_order_matters_through_bigrams() -> None:
    a, b, c = hashing_embed(
        ["postgres replaces mysql", "mysql replaces postgres", "postgres replaces mysql"]
    )
    assert a == c
    assert 0.0 < cosine(a, b) < 0.99


def test_batch_equals_one_by_one() -> None:
    assert hashing_embed(TEXTS) == [hashing_embed([t])[0] for t in TEXTS]


def test_dimension_must_be_positive() -> None:
    with pytest.raises(ValueError):
        hashing_embed(["x"], dim=0)


@given(st.text(max_size=200))
def test_every_vector_is_unit_or_zero(text: str) -> None:
    (vector,) = hashing_embed([text], dim=32)
    norm = math.sqrt(sum(v * v for v in vector))
    assert norm == pytest.approx(1.0) or norm == 0.0
