"""HNSW indexes per large user and embedder (models/store/memories/vector_index.py, built by
workers/indexing.py) and the vector read that uses them, on PostgreSQL with pgvector."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.orm import Session

from memlane.models.db import get_engine, unit_of_work
from memlane.models.schemas import MemoryCreate
from memlane.models.store.memories import memories, vector_index
from memlane.models.store.reads import assembly as assembly_reads
from memlane.models.store.reads.assembly import QueryVector
from memlane.pipeline.dedup.keywords import keywords

MODEL = "dense-test"
DIM = 3


def unit(angle: float) -> list[float]:
    return [math.cos(angle), math.sin(angle), 0.0]


def add(s: Session, now: datetime, user_id: str, content: str, angle: float) -> str:
    """A memory of MODEL whose vector lies at `angle`; its id."""
    return memories.add(
        s,
        user_id=user_id,
        memory=MemoryCreate(content=content, importance=0.5),
        keywords=keywords(content),
        embedding=unit(angle),
        embedding_model=MODEL,
        now=now,
    ).id


def add_many(url: str, now: datetime, n: int) -> dict[str, float]:
    """n memories of user u1 whose vectors lie at angles 0 … π/2; id → angle."""
    angles: dict[str, float] = {}
    with unit_of_work(url) as s:
        for i in range(n):
            angle = (math.pi / 2) * i / (n - 1)
            angles[add(s, now, "u1", f"User note number {i} about topic {i % 7}", angle)] = angle
    return angles


def vector_read(url: str, now: datetime, angle: float, *, approximate: bool, k: int) -> Any:
    with unit_of_work(url) as s:
        return assembly_reads.assembly_candidates(
            s,
            "u1",
            now=now,
            strategy="scored",
            query_vector=QueryVector(MODEL, unit(angle)),
            top_k=k,
            strategy_top_k=1,
            approximate=approximate,
        )


def test_ensure_builds_one_valid_partial_index_and_is_idempotent(pg: str) -> None:
    engine = get_engine(pg)
    name = vector_index.ensure_hnsw(engine, "u1", MODEL, DIM)
    assert name == vector_index.index_name("u1", MODEL, DIM)
    assert vector_index.ensure_hnsw(engine, "u1", MODEL, DIM) == name
    assert vector_index.hnsw_indexes(engine).count(name) == 1
    with engine.connect() as conn:
        definition = conn.execute(
            text("SELECT indexdef FROM pg_indexes WHERE indexname = :n"), {"n": name}
        ).scalar_one()
        valid = conn.execute(
            text(
                "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "WHERE c.relname = :n"
            ),
            {"n": name},
        ).scalar_one()
    assert valid is True
    assert "USING hnsw (((embedding)::vector(3)) vector_cosine_ops)" in definition
    assert "(user_id)::text = 'u1'::text" in definition
    assert f"embedding_model)::text = '{MODEL}'::text" in definition
    assert "embedding_dim = 3" in definition


def test_a_quote_in_a_name_cannot_break_the_statement(pg: str) -> None:
    name = vector_index.ensure_hnsw(get_engine(pg), "o'brien", "it's-a-model", 4)
    assert name is not None and name in vector_index.hnsw_indexes(get_engine(pg))


def test_the_approximate_read_goes_through_the_hnsw_index_and_finds_the_nearest(
    pg: str, now: datetime
) -> None:
    angles = add_many(pg, now, 40)
    vector_index.ensure_hnsw(get_engine(pg), "u1", MODEL, DIM)
    statements: list[tuple[str, Any]] = []
    engine = get_engine(pg)

    def capture(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        statements.append((statement, params))

    event.listen(engine, "before_cursor_execute", capture)
    try:
        got = vector_read(pg, now, 0.3, approximate=True, k=5)
    finally:
        event.remove(engine, "before_cursor_execute", capture)
    nearest = sorted(angles, key=lambda i: (abs(angles[i] - 0.3), i))[:5]
    assert set(nearest) <= {m.id for m in got.memories}
    assert got.retrieval_mode.startswith("pgvector-hnsw+")
    statement, params = statements[0]
    with engine.connect() as conn:
        # On 40 rows the planner would rightly sort them all; without sorts it must show
        # that the read's shape lets the index serve the vector top-k.
        conn.execute(text("SET enable_sort = off"))
        plan = conn.exec_driver_sql("EXPLAIN " + statement, params).scalars().all()
    assert any(vector_index.index_name("u1", MODEL, DIM) in line for line in plan), plan


def test_the_exact_read_breaks_distance_ties_by_id(pg: str, now: datetime) -> None:
    with unit_of_work(pg) as s:
        for i in range(6):
            add(s, now, "u1", f"User same vector {i}", 0.0)
        ids = sorted(m.id for m in memories.list_for_user(s, "u1"))
    got = vector_read(pg, now, 0.0, approximate=False, k=2)
    # The vector part's two are the smallest ids among six equal distances; the strategy
    # parts (k=1, all else equal) add the smallest id again.
    assert {m.id for m in got.memories} == set(ids[:2])
    assert got.retrieval_mode.startswith("pgvector-exact+")


def test_no_index_on_sqlite_or_beyond_the_hnsw_dimension_limit(pg: str, sqlite_url: str) -> None:
    assert vector_index.ensure_hnsw(get_engine(sqlite_url), "u1", MODEL, DIM) is None
    assert vector_index.hnsw_indexes(get_engine(sqlite_url)) == []
    big = vector_index.MAX_HNSW_DIM + 1
    assert vector_index.ensure_hnsw(get_engine(pg), "u1", "huge-model", big) is None
    assert vector_index.index_name("u1", "huge-model", big) not in vector_index.hnsw_indexes(
        get_engine(pg)
    )


def test_only_users_at_the_threshold_get_an_index(pg: str, now: datetime) -> None:
    engine = get_engine(pg)
    add_many(pg, now, 12)  # u1
    with unit_of_work(pg) as s:
        add(s, now, "u2", "User has one note", 0.1)
    assert vector_index.large_users(engine, MODEL, DIM, 10) == ["u1"]
    built = vector_index.ensure_for_users(engine, ["u1", "u2"], MODEL, DIM, 10)
    assert built == [vector_index.index_name("u1", MODEL, DIM)]
    assert vector_index.hnsw_indexes(engine) == built
    # another embedder's vectors do not count towards this one's index
    assert vector_index.large_users(engine, "other-model", DIM, 10) == []


def test_the_store_stage_indexes_a_user_who_became_large(pg: str) -> None:
    from memlane.config.settings import load_settings
    from memlane.service.facade import Memlane
    from tests.integration.test_inprocess import dated_transcript

    engine = get_engine(pg)
    start = datetime(2026, 1, 12, 9, 0, tzinfo=UTC)
    for threshold, indexed in ((1000, False), (1, True)):
        settings = load_settings(database_url=pg, vector_index="hnsw", hnsw_min_memories=threshold)
        with Memlane(settings) as lane:
            result = lane.enqueue({**dated_transcript(start), "conversation_id": f"c{threshold}"})
            assert set(lane.wait(result.job_ids, timeout=30).values()) == {"done"}
            name = vector_index.index_name("u1", lane.embedder.name, lane.embedder.dim)
        assert (name in vector_index.hnsw_indexes(engine)) is indexed


def test_index_if_large_follows_the_policy_and_never_raises(pg: str, now: datetime) -> None:
    from memlane.config.settings import load_settings
    from memlane.pipeline.ranking.embedding import EmbedderCapabilities
    from memlane.workers.indexing import index_if_large

    add_many(pg, now, 3)
    dense = EmbedderCapabilities(dim=DIM, ann_helps=True, lexical=False)
    exact = load_settings(database_url=pg, vector_index="exact", hnsw_min_memories=1)
    assert index_if_large(exact, "u1", MODEL, dense) is None
    auto = load_settings(database_url=pg, vector_index="auto", hnsw_min_memories=1)
    assert index_if_large(auto, "u1", MODEL, replace(dense, ann_helps=False)) is None
    hnsw = load_settings(database_url=pg, vector_index="hnsw", hnsw_min_memories=1)
    assert index_if_large(hnsw, "u1", MODEL, dense) == vector_index.index_name("u1", MODEL, DIM)
    # no vectors of that dimension: no index
    too_long = replace(dense, dim=vector_index.MAX_HNSW_DIM + 1)
    assert index_if_large(hnsw, "u1", MODEL, too_long) is None
