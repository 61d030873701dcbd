"""The assembler's read on PostgreSQL (models/pipelined.py, `read_for_assembly`): one
pipelined round trip on an autocommit connection, giving what the ORM read gives."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from sqlalchemy import bindparam, func, select

from memlane.models.db import autocommit_engine, read_unit, unit_of_work
from memlane.models.pipelined import compile_read, run_reads
from memlane.models.store.reads import assembly as assembly_reads
from memlane.models.store.reads.assembly import CandidateQuery, QueryVector
from memlane.models.store.users import context_items
from memlane.models.tables import MemoryRow
from memlane.pipeline.records import ExtractedEpisode
from tests.integration.conftest import PG_ADMIN_URL
from tests.integration.test_store_memories import add

ODD_USER = "o'brien\\x; --"  # a quote, a backslash and SQL-looking text, read as a name


def both_reads(url: str, user_id: str, now: datetime, query: str, vector: list[float]) -> Any:
    wanted = CandidateQuery(
        now=now,
        strategy="scored",
        query_vector=QueryVector("test", vector),
        query_text=query,
        top_k=3,
        strategy_top_k=2,
        lexical_top_k=2,
    )
    pipelined = assembly_reads.read_for_assembly(url, user_id, wanted, episode_limit=2)
    orm = read_unit(
        url,
        lambda s: (
            assembly_reads.candidates_in(s, user_id, wanted, None),
            context_items.context_items(s, user_id, episode_limit=2),
        ),
    )
    return pipelined, orm


def seed(url: str, now: datetime, user_id: str) -> None:
    for i in range(8):
        angle = [1.0, i / 8]
        add(
            url,
            now - timedelta(hours=i),
            f"Project note {i} about deploys",
            user=user_id,
            vector=angle,
        )
    add(url, now, "Pinned: the user writes Rust", user=user_id, vector=[0.0, 1.0], tier="pinned")
    add(url, now, "A secret the user shared", user=user_id, vector=[1.0, 0.0], sensitive=True)
    expired = now - timedelta(days=1)
    add(url, now, "An expired plan", user=user_id, vector=[1.0, 0.0], expires_at=expired)
    with unit_of_work(url) as s:
        for i in range(3):
            context_items.save_episode(
                s,
                user_id=user_id,
                conversation_id=f"c{i}",
                job_id=f"job-{user_id}-{i}",
                episode=ExtractedEpisode(summary=f"Deploys, part {i}", topics=["deploys"]),
                created_at=now - timedelta(days=i),
            )
        context_items.set_soul_block(s, user_id=user_id, kind="style", content="Terse", now=now)
        context_items.add_procedure(
            s, user_id=user_id, name="Deploy", content="Steps.", keywords={"deploy"}, now=now
        )


def test_the_pipelined_read_gives_what_the_orm_read_gives(pg: str, now: datetime) -> None:
    seed(pg, now, "u1")
    seed(pg, now, ODD_USER)
    for user_id in ("u1", ODD_USER):
        (candidates, items), (orm_candidates, orm_items) = both_reads(
            pg, user_id, now, "which deploys project", [1.0, 0.3]
        )
        assert candidates == orm_candidates
        assert items == orm_items
        assert {m.user_id for m in candidates.memories} == {user_id}
        contents = {m.content for m in candidates.memories}
        assert "Pinned: the user writes Rust" in contents
        assert not contents & {"A secret the user shared", "An expired plan"}
        assert len(items.episodes) == 2 and items.soul_blocks[0].content == "Terse"
        assert [p.name for p in items.procedures] == ["Deploy"]
        # timestamps in datetime.UTC, as the ORM types give them
        assert all(m.created_at.tzinfo is UTC for m in candidates.memories)


def test_a_user_id_is_inlined_as_a_literal_not_as_sql(pg: str, now: datetime) -> None:
    add(pg, now, "The odd user's note", user=ODD_USER, vector=[1.0, 0.0])
    add(pg, now, "Another user's note", user="o", vector=[1.0, 0.0])
    (candidates, _), _ = both_reads(pg, ODD_USER, now, "note", [1.0, 0.0])
    assert [m.content for m in candidates.memories] == ["The odd user's note"]


def test_a_read_survives_its_pooled_connection_being_killed(pg: str) -> None:
    pid = compile_read(select(func.pg_backend_pid()))
    engine = autocommit_engine(pg)
    [(_, [(first,)])] = run_reads(engine, [(pid, {})])
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", (first,)).fetchone() == (True,)
    [(_, [(second,)])] = run_reads(engine, [(pid, {})])
    assert second != first


def test_other_errors_are_raised_at_once(pg: str) -> None:
    bad = compile_read(select(MemoryRow.id).where(MemoryRow.id == "x"))
    broken = bad.__class__(sql=bad.sql.replace("memories", "no_such_table"), params=bad.params)
    with pytest.raises(psycopg.errors.UndefinedTable):
        run_reads(autocommit_engine(pg), [(broken, {})])
    # the connection went back to the pool usable
    [(names, rows)] = run_reads(autocommit_engine(pg), [(bad, {})])
    assert names == ["id"] and rows == []


def test_a_literal_parameter_without_a_value_is_refused() -> None:
    statement = select(MemoryRow.id).where(
        MemoryRow.user_id == bindparam("who", literal_execute=True)
    )
    with pytest.raises(ValueError, match="'who'"):
        compile_read(statement)
    assert "'it''s'" in compile_read(statement, {"who": "it's"}).sql
