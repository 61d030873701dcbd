"""The pipelined read's parameters (models/store/reads/assembly.py): what psycopg is given
without SQLAlchemy's types, which the ORM read has convert them."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from pgvector import Vector

from memlane.models.store.reads.assembly import CandidateQuery, QueryVector, _CandidatesRead


def test_the_query_vector_goes_as_pgvector_text_and_the_orm_params_stay() -> None:
    rng = random.Random(7)
    vector = [rng.gauss(0, 0.2) for _ in range(384)] + [1e-9, 123456.789, -0.0, 1 / 3]
    question = "where do I deploy"
    query = CandidateQuery(
        now=datetime(2026, 3, 1, tzinfo=UTC),
        strategy="scored",
        query_vector=QueryVector("m", vector),
        query_text=question,
        top_k=5,
    )
    read = _CandidatesRead.plan(True, "u1", query)
    params = read.pg_params()
    # the vector as text in pgvector's form (float32 values, as the ORM's Vector type)
    assert params["q"].startswith("[") and params["q"].count(",") == len(vector) - 1
    assert Vector.from_text(params["q"]).to_list() == Vector(vector).to_list()
    assert read.params["q"] == vector  # the ORM read's parameters are left as they are
    assert params["tsq"] == "where or do or i or deploy"
