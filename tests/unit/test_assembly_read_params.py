"""The pipelined read's parameters (models/store/assembly_reads.py): the query vector is
sent in the text form pgvector's own types send, so both reads compare the same float32s."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from pgvector import Vector

from models.store.assembly_reads import CandidateQuery, QueryVector, _CandidatesRead


def test_the_query_vector_is_sent_as_pgvector_writes_it() -> None:
    rng = random.Random(7)
    vector = [rng.gauss(0, 0.2) for _ in range(384)] + [1e-9, 123456.789, -0.0, 1 / 3]
    query = CandidateQuery(
        now=datetime(2026, 3, 1, tzinfo=UTC),
        strategy="scored",
        query_vector=QueryVector("m", vector),
        query_text="where do I deploy",
        top_k=5,
    )
    read = _CandidatesRead.plan(True, "u1", query)
    params = read.pg_params()
    assert params["q"] == Vector(vector).to_text()
    assert read.params["q"] == vector  # the ORM read's own parameters are left as they are
    assert params["tsq"] == "where or do or i or deploy"
