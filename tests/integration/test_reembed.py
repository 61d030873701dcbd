"""`memlane reembed`: next-vectors filled per user, one swap per user, old vectors serving
until then, and the assembler serving both models meanwhile. Both backends; the Celery
task with a real worker on PostgreSQL + Redis."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from memlane.cli.app import app
from memlane.config.settings import load_settings
from memlane.models.db import unit_of_work
from memlane.models.schemas import MemoryCreate
from memlane.models.store.memories import edits as memory_changes
from memlane.models.store.memories import memories, reembed
from memlane.models.tables import MemoryRow
from memlane.pipeline.dedup.keywords import keywords
from memlane.pipeline.ranking.hashing_embedder import hashing_embed
from memlane.service.facade import Memlane
from memlane.workers.reembed import run_reembed_user
from tests.integration.fleet import WorkerProcess, fleet_env

OLD, NEW = "hashing-64", "hashing-128"


def add(url: str, now: datetime, content: str, *, user: str = "u1", dim: int = 64) -> str:
    with unit_of_work(url) as s:
        return memories.add(
            s,
            user_id=user,
            memory=MemoryCreate(content=content),
            keywords=keywords(content),
            embedding=hashing_embed([content], dim=dim)[0],
            embedding_model=f"hashing-{dim}",
            now=now,
        ).id


def serving(url: str, user: str = "u1") -> dict[str, tuple[str | None, int | None, bool]]:
    """id → (embedding_model, embedding_dim, has a parked next vector)."""
    with unit_of_work(url) as s:
        rows = s.execute(
            select(
                MemoryRow.id,
                MemoryRow.embedding_model,
                MemoryRow.embedding_dim,
                MemoryRow.embedding_next,
            ).where(MemoryRow.user_id == user)
        ).all()
    return {r.id: (r.embedding_model, r.embedding_dim, r.embedding_next is not None) for r in rows}


def test_old_vectors_serve_until_every_new_one_is_ready(db_url: str, now: datetime) -> None:
    ids = [add(db_url, now, text) for text in ("User likes tea", "User lives in Oslo", "User runs")]
    with unit_of_work(db_url) as s:
        page = reembed.pending_batch(s, "u1", model=NEW, dim=128, limit=2)
        assert [memory_id for memory_id, _ in page] == sorted(ids)[:2]
        reembed.save_next(s, "u1", {i: hashing_embed([c], dim=128)[0] for i, c in page}, model=NEW)
    with unit_of_work(db_url) as s:
        assert reembed.swap_if_complete(s, "u1", model=NEW, dim=128) is None
    # nothing moved: two parked vectors, every memory still serves the old model
    assert sorted(serving(db_url).values()) == [(OLD, 64, False), (OLD, 64, True), (OLD, 64, True)]
    with unit_of_work(db_url) as s:
        (last,) = reembed.pending_batch(s, "u1", model=NEW, dim=128, limit=10)
        reembed.save_next(s, "u1", {last[0]: hashing_embed([last[1]], dim=128)[0]}, model=NEW)
    with unit_of_work(db_url) as s:
        assert reembed.swap_if_complete(s, "u1", model=NEW, dim=128) == 3
    assert set(serving(db_url).values()) == {(NEW, 128, False)}
    with unit_of_work(db_url) as s:
        row = memories.get(s, "u1", ids[0])
        assert row.embedding == pytest.approx(hashing_embed([row.content], dim=128)[0], abs=1e-6)


def test_a_memory_stored_with_the_old_model_before_the_swap_holds_it_back(
    db_url: str, now: datetime
) -> None:
    add(db_url, now, "User likes tea")
    with unit_of_work(db_url) as s:
        page = reembed.pending_batch(s, "u1", model=NEW, dim=128, limit=10)
        reembed.save_next(s, "u1", {i: hashing_embed([c], dim=128)[0] for i, c in page}, model=NEW)
    add(db_url, now, "User moved to Bergen")  # the store step, still on the old model
    with unit_of_work(db_url) as s:
        assert reembed.swap_if_complete(s, "u1", model=NEW, dim=128) is None
    assert {model for model, _, _ in serving(db_url).values()} == {OLD}


def test_run_reembed_user_moves_one_user_skips_deleted_and_is_idempotent(
    db_url: str, now: datetime
) -> None:
    settings = load_settings(database_url=db_url)
    kept = [add(db_url, now, "User likes tea"), add(db_url, now, "User lives in Oslo")]
    forgotten = add(db_url, now, "User's old address")
    other = add(db_url, now, "User likes coffee", user="u2")
    with unit_of_work(db_url) as s:
        memory_changes.set_status(s, "u1", forgotten, "deleted")
        assert reembed.users_to_reembed(s, model=NEW, dim=128) == ["u1", "u2"]

    outcome = run_reembed_user("u1", NEW, 128, settings, page_size=1)
    assert (outcome.embedded, outcome.swapped) == (2, 2)
    after = serving(db_url)
    assert {after[i] for i in kept} == {(NEW, 128, False)}
    assert after[forgotten] == (OLD, 64, False)  # deleted text is not sent anywhere
    assert serving(db_url, "u2")[other] == (OLD, 64, False)
    with unit_of_work(db_url) as s:
        assert reembed.users_done(s, ["u1", "u2"], model=NEW, dim=128) == {"u1"}
        assert reembed.users_to_reembed(s, model=NEW, dim=128) == ["u2"]

    again = run_reembed_user("u1", NEW, 128, settings)
    assert (again.embedded, again.swapped) == (0, 0)


def test_assembly_serves_a_user_whose_vectors_are_not_moved_yet(db_url: str, now: datetime) -> None:
    # The operator switched the setting to hashing-128; u1's vectors are still hashing-64.
    tea = add(db_url, now - timedelta(days=1), "User drinks green tea every morning")
    add(db_url, now - timedelta(days=1), "User works on the billing service")
    lane = Memlane(load_settings(database_url=db_url, embedding_model="hashing", embedding_dim=128))
    try:
        during = lane.assemble("u1", "green tea", budget_tokens=500, now=now)
        assert during.pack.retrieval_mode.endswith("+also:hashing-64")
        relevance = {i.id: i.components.relevance for i in during.pack.items if i.components}
        # the old vectors still give a cosine (0.7 of it: the lexical half is there too)
        assert relevance[tea] > 0.7 * 0.5
        lane.reembed_done(lane.reembed(), wait_s=30)
        after = lane.assemble("u1", "green tea", budget_tokens=500, now=now)
        assert "+also:" not in after.pack.retrieval_mode
        moved = {i.id: i.components.relevance for i in after.pack.items if i.components}
        assert moved[tea] > 0.7 * 0.5
    finally:
        lane.close()


def test_a_store_of_the_former_default_is_named_for_reembed_and_still_found(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # a store built when hashing was the default, opened with today's default (minilm)
    with Memlane(load_settings(database_url=db_url, embedding_model="hashing")) as before:
        tea = before.add_memory("u1", {"content": "User drinks green tea every morning"}).id
        before.add_memory("u2", {"content": "User works on the billing service"})
    with caplog.at_level(logging.WARNING, logger="memlane"):
        lane = Memlane(load_settings(database_url=db_url))
        try:
            hits = lane.search("u1", "green tea")
            (warning,) = [r.getMessage() for r in caplog.records if "reembed" in r.getMessage()]
            assert "2 memories of 2 user(s) are embedded with hashing-256 (256 dims)" in warning
            assert "not minilm-l6-v2-int8" in warning and "run `memlane reembed`" in warning
            # reading still works: the query is embedded with hashing for those memories
            assert hits[0].memory.id == tea and hits[0].relevance > 0.5
            context = lane.assemble("u1", "green tea", budget_tokens=500)
            assert context.pack.retrieval_mode.endswith("+also:hashing-256")
            assert "green tea" in context.text
            lane.reembed_done(lane.reembed(), wait_s=30)
        finally:
            lane.close()
    assert len([r for r in caplog.records if "reembed" in r.getMessage()]) == 1  # once
    caplog.clear()
    with (
        caplog.at_level(logging.WARNING, logger="memlane"),
        Memlane(load_settings(database_url=db_url)) as after,
    ):
        assert after.search("u1", "green tea")[0].memory.id == tea
    assert not [r for r in caplog.records if "reembed" in r.getMessage()]


def test_the_cli_warns_of_a_store_of_another_embedder_without_debug(sqlite_url: str) -> None:
    with Memlane(load_settings(database_url=sqlite_url, embedding_model="hashing")) as before:
        before.add_memory("u1", {"content": "User drinks green tea every morning"})
    done = subprocess.run(
        [sys.executable, "-m", "memlane", "search", "--user", "u1", "-q", "tea", "--json"],
        env={**os.environ, "MEMLANE_DATABASE_URL": sqlite_url},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "warning: 1 memory of 1 user(s) are embedded with hashing-256" in done.stderr
    assert "memlane reembed" in done.stderr
    assert "green tea" in done.stdout


def test_the_cli_reembeds_in_process_with_a_progress_bar(sqlite_url: str, now: datetime) -> None:
    for user in ("u1", "u2", "u3"):
        add(sqlite_url, now, f"{user} likes tea", user=user)
    result = CliRunner().invoke(
        app,
        ["reembed", "--to", "hashing", "--dim", "128"],
        env={
            "MEMLANE_DATABASE_URL": sqlite_url,
            "MEMLANE_EMBEDDING_MODEL": "hashing",
            "MEMLANE_EMBEDDING_DIM": "128",
        },
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "3 user(s) now serve hashing-128"
    assert "re-embedding 3 user(s) with hashing-128 (128 dims)" in result.stderr
    assert "3/3" in result.stderr
    assert "note:" not in result.stderr  # the target is the configured embedder
    assert {v for u in ("u1", "u2", "u3") for v in serving(sqlite_url, u).values()} == {
        (NEW, 128, False)
    }
    again = CliRunner().invoke(
        app,
        ["reembed", "--to", "hashing", "--dim", "128"],
        env={"MEMLANE_DATABASE_URL": sqlite_url},
    )
    assert again.exit_code == 0
    assert "re-embedding 0 user(s)" in again.stderr
    assert "note: MEMLANE_EMBEDDING_MODEL gives minilm-l6-v2-int8" in again.stderr  # the default


@pytest.mark.timeout(180)
def test_celery_workers_reembed_each_user(
    pg: str, redis_url: str, tmp_path: Path, now: datetime
) -> None:
    for user in ("u1", "u2"):
        for text in ("likes tea", "lives in Oslo", "runs marathons"):
            add(pg, now, f"{user} {text}", user=user)
    env = fleet_env(pg, redis_url, embedding_model="hashing", embedding_dim="128")
    worker = WorkerProcess(env, log_dir=tmp_path)
    lane = Memlane(
        load_settings(
            database_url=pg, broker_url=redis_url, embedding_model="hashing", embedding_dim=128
        )
    )
    try:
        worker.wait_ready()
        run = lane.reembed()
        assert (run.model, run.dim, run.user_ids) == (NEW, 128, ("u1", "u2"))
        deadline = time.monotonic() + 60
        while lane.reembed_done(run) != {"u1", "u2"}:
            assert time.monotonic() < deadline, worker.log()
            time.sleep(0.2)
        assert {v for u in ("u1", "u2") for v in serving(pg, u).values()} == {(NEW, 128, False)}
        assert "memlane.reembed_user" in worker.log()
    finally:
        lane.close()
        worker.stop()
