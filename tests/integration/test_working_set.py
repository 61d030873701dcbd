"""The per-process working set: every write through one front door reaches another
process's very next assembly through the change feed; the bound holds; a warm view
equals a cold one; users the working set cannot serve go to the store read."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, event, text
from sqlalchemy.orm import Session

from memlane.config.settings import load_settings
from memlane.models import working_set
from memlane.models.db import get_engine, unit_of_work
from memlane.models.store.users import change_feed as changes
from memlane.models.store.users import context_items
from memlane.models.working_set import WorkingSet
from memlane.pipeline.assembly.tokens import encoding_for_model
from memlane.service.facade import Memlane
from memlane.workers.embedders import get_embedder

NOW = datetime(2026, 3, 1, 12, 0).astimezone()
# The working set is not about the embedder: every lane here pins hashing (no model to
# load in each process, no per-memory inference in the streams of users).


@pytest.fixture
def reader(db_url: str) -> Iterator[Memlane]:
    with Memlane(
        load_settings(embedding_model="hashing", database_url=db_url, working_set_mb=64)
    ) as lane:
        yield lane


class OtherProcess:
    """Another Python process with `lane`, a Memlane of its own, that runs the code it is
    sent (one process for the whole test: starting one per write cost seconds each)."""

    SERVE = textwrap.dedent(
        """
        import contextlib, io, json, sys, traceback
        from memlane import Memlane
        lane = Memlane.from_settings(database_url=sys.argv[1], embedding_model="hashing")
        for line in sys.stdin:
            out, error = io.StringIO(), None
            try:
                with contextlib.redirect_stdout(out):
                    exec(json.loads(line), {"lane": lane})
            except Exception:
                error = traceback.format_exc()
            print(json.dumps({"out": out.getvalue(), "error": error}), flush=True)
        """
    )

    def __init__(self, db_url: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", self.SERVE, db_url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(self, code: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(textwrap.dedent(code)) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"the other process exited ({self.proc.wait(timeout=10)})"
        answer = json.loads(line)
        assert answer["error"] is None, answer["error"]
        return str(answer["out"]).strip()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


@pytest.fixture
def other(db_url: str) -> Iterator[OtherProcess]:
    process = OtherProcess(db_url)
    try:
        yield process
    finally:
        process.close()


def context(lane: Memlane, now: datetime, query: str = "what does the user drink?") -> str:
    result = lane.assemble("u1", query, budget_tokens=1500, now=now)
    assert result.pack.retrieval_mode == "working-set"
    return result.text


def test_a_write_in_another_process_reaches_the_next_assembly(
    reader: Memlane, other: OtherProcess, now: datetime
) -> None:
    first = reader.add_memory("u1", {"content": "Drinks green tea every morning."})
    assert "green tea" in context(reader, now)  # the working set is loaded

    added = other.run("print(lane.add_memory('u1', {'content': 'Drinks oolong after lunch.'}).id)")
    assert "oolong" in context(reader, now)

    other.run(f"lane.pin('u1', {added!r})")
    pinned = reader.assemble("u1", "tea", budget_tokens=1500, now=now).pack
    assert [i.tier for i in pinned.items if i.id == added] == ["pinned"]

    other.run(f"lane.forget('u1', {first.id!r})")
    assert "green tea" not in context(reader, now)
    other.run(f"lane.quarantine('u1', {added!r})")
    assert "oolong" not in context(reader, now)

    other.run("lane.set_soul_block('u1', 'identity', 'A tea sommelier.')")
    assert "A tea sommelier." in context(reader, now)
    other.run("print(lane.add_procedure('u1', 'brew', 'Water at 80 degrees, 2 minutes.').id)")
    assert "80 degrees" in context(reader, now, "how do I brew the tea?")


def test_a_removed_item_and_a_confirmation_reach_the_view(
    reader: Memlane, db_url: str, now: datetime
) -> None:
    reader.set_soul_block("u1", "style", "Short answers.")
    procedure = reader.add_procedure("u1", "brew", "Water at 80 degrees, 2 minutes.")
    assert "Short answers." in context(reader, now, "brew tea")
    with unit_of_work(db_url) as session:
        context_items.delete_soul_block(session, user_id="u1", kind="style")
        context_items.delete_procedure(session, user_id="u1", procedure_id=procedure.id)
    text = context(reader, now, "brew tea")
    assert "Short answers." not in text and "80 degrees" not in text


def test_a_warm_view_assembles_what_a_cold_one_does(
    reader: Memlane, db_url: str, now: datetime
) -> None:
    for n in range(30):
        reader.add_memory(
            "u1",
            {
                "content": f"Fact {n}: likes tea number {n} from shop s{n} in town t{n}.",
                "importance": 0.5,
            },
        )
    context(reader, now)  # warm
    ids = [m.id for m in reader.list_memories("u1")]
    reader.pin("u1", ids[3])
    reader.forget("u1", ids[4])
    reader.mark_sensitive("u1", ids[5])
    reader.add_memory("u1", {"content": "Fact 99: likes tea with honey.", "importance": 0.9})
    warm = reader.assemble("u1", "tea with honey", budget_tokens=400, now=now)
    with Memlane(
        load_settings(embedding_model="hashing", database_url=db_url, working_set_mb=64)
    ) as cold_lane:
        cold = cold_lane.assemble("u1", "tea with honey", budget_tokens=400, now=now)
    assert warm.text == cold.text
    assert warm.pack_data["items"] == cold.pack_data["items"]


def test_the_change_number_moves_once_per_writing_transaction(db_url: str) -> None:
    with unit_of_work(db_url) as session:
        assert changes.version(session, "u1") == changes.NO_USER  # never written
        context_items.set_soul_block(session, user_id="u1", kind="identity", content="0", now=NOW)
    with unit_of_work(db_url) as session:
        before = changes.version(session, "u1")
    with unit_of_work(db_url) as session:
        context_items.set_soul_block(session, user_id="u1", kind="identity", content="a", now=NOW)
        context_items.set_soul_block(session, user_id="u1", kind="style", content="b", now=NOW)
    with unit_of_work(db_url) as session:
        after = changes.version(session, "u1")
        found = changes.since(session, "u1", before)
    assert after == before + 1
    assert found.version == after and len(found.soul_blocks) == 2
    with unit_of_work(db_url) as session:
        assert not changes.since(session, "u1", after)


def test_the_bound_holds_under_a_stream_of_users(db_url: str) -> None:
    settings = load_settings(embedding_model="hashing", database_url=db_url)
    embedder = get_embedder(settings)
    with Memlane(settings) as lane:
        for n in range(12):
            for k in range(20):
                lane.add_memory(
                    f"user{n}",
                    {"content": f"User {n} fact {k} about tea from shop s{k} in town t{k}."},
                )
    working = WorkingSet(db_url, budget_mb=0.15)
    seen = []
    for n in range(12):
        view = working.view(f"user{n}", model=embedder.name, dim=embedder.dim)
        assert view is not None and len(view.memories) == 20
        assert working.size_bytes <= working.budget_bytes
        seen.append(f"user{n}" in working)
    assert all(seen) and "user0" not in working  # least recently used went first
    tiny = WorkingSet(db_url, budget_mb=0.001)  # a user too large for the bound
    assert tiny.view("user0", model=embedder.name, dim=embedder.dim) is None


def test_a_user_too_large_for_the_bound_is_loaded_once(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = load_settings(embedding_model="hashing", database_url=db_url)
    embedder = get_embedder(settings)
    with Memlane(settings) as lane:
        for k in range(20):
            lane.add_memory("big", {"content": f"Fact {k} about tea from shop s{k} in town t{k}."})
    loads: list[str] = []
    load = working_set._load

    def counted(session: Session, user_id: str, *args: Any) -> Any:
        loads.append(user_id)
        return load(session, user_id, *args)

    monkeypatch.setattr(working_set, "_load", counted)
    tiny = WorkingSet(db_url, budget_mb=0.001)
    for _ in range(3):  # the store serves them; one load found them too large
        assert tiny.view("big", model=embedder.name, dim=embedder.dim) is None
    assert loads == ["big"]
    assert not tiny.warm("big", model=embedder.name, dim=embedder.dim)  # warm tries again
    assert loads == ["big", "big"]


def test_users_the_working_set_cannot_serve_go_to_the_store(db_url: str, now: datetime) -> None:
    with Memlane(
        load_settings(embedding_model="hashing", database_url=db_url, working_set_mb=0.001)
    ) as lane:
        lane.add_memory("u1", {"content": "Drinks green tea every morning."})
        result = lane.assemble("u1", "tea", budget_tokens=500, now=now)
        assert result.pack.retrieval_mode != "working-set"
        assert "green tea" in result.text
    with Memlane(
        load_settings(embedding_model="hashing", database_url=db_url, working_set_mb=64)
    ) as lane:
        recent = lane.assemble("u1", "tea", strategy="recent", budget_tokens=500, now=now)
        assert recent.pack.retrieval_mode != "working-set"  # `recent` reads the store
        later = now + timedelta(days=1)
        assert lane.assemble("u1", "tea", budget_tokens=500, now=later).pack.retrieval_mode == (
            "working-set"
        )


def test_a_poll_reads_changed_memories_as_a_session_does(reader: Memlane, db_url: str) -> None:
    first = reader.add_memory("u1", {"content": "Drinks green tea every morning."})
    with unit_of_work(db_url) as session:
        before = changes.version(session, "u1")
    added = reader.add_memory("u1", {"content": "Walks the dog at 7.", "importance": 0.9})
    reader.pin("u1", first.id)
    reader.forget("u1", added.id)
    number, polled = changes.poll(db_url, "u1", before)
    with unit_of_work(db_url) as session:
        read = changes.since(session, "u1", before)
    assert number == read.version == before + 3
    if db_url.startswith("sqlite"):
        assert polled is None  # SQLite reads the rows in a session
        return
    assert polled is not None and polled.version == number
    assert [(r, s) for r, s, _ in polled.memories] == [(r, s) for r, s, _ in read.memories]
    assert [r.created_at.tzinfo for r, _, _ in polled.memories] == [UTC, UTC]
    assert [(m, v.tolist()) for _, _, (m, v) in polled.memories] == [
        (m, v.tolist()) for _, _, (m, v) in read.memories
    ]
    # another table changed: the poll says so and leaves the rows to `since`
    reader.set_soul_block("u1", "style", "Short answers.")
    assert changes.poll(db_url, "u1", number) == (number + 1, None)
    assert changes.poll(db_url, "u1", number + 1) == (number + 1, changes.Changes(number + 1))


def test_a_large_user_is_served_by_the_store_while_their_view_loads(
    reader: Memlane, db_url: str, now: datetime
) -> None:
    for n in range(6):
        reader.add_memory(
            "u1", {"content": f"Fact {n}: likes tea number {n} from shop s{n} in town t{n}."}
        )
    embedder = get_embedder(reader.settings)
    working = WorkingSet(db_url, budget_mb=64, eager_items=5)
    assert working.view("u1", model=embedder.name, dim=embedder.dim) is None  # loading
    assert working.warm("u1", model=embedder.name, dim=embedder.dim)
    view = working.view("u1", model=embedder.name, dim=embedder.dim)
    assert view is not None and len(view.memories) == 6
    small = WorkingSet(db_url, budget_mb=64, eager_items=6)  # at the limit: loaded at once
    assert small.view("u1", model=embedder.name, dim=embedder.dim) is not None
    # through the facade: the first assembly reads the store, a warmed one the view
    reader.contexts._working = WorkingSet(db_url, budget_mb=64, eager_items=5)
    assert reader.assemble("u1", "tea", now=now).pack.retrieval_mode != "working-set"
    assert reader.warm("u1")
    assert reader.assemble("u1", "tea", now=now).pack.retrieval_mode == "working-set"


def test_warm_counts_every_line_ahead_in_the_default_encoding_and_style(
    reader: Memlane, now: datetime
) -> None:
    for n in range(6):
        reader.add_memory("u1", {"content": f"Fact {n}: likes tea number {n} from shop s{n}."})
    before = reader.assemble("u1", "tea", now=now)  # loads the view, counts what it walks
    embedder = get_embedder(reader.settings)
    key = (encoding_for_model(reader.settings.token_model), reader.settings.context_style)
    assert reader.warm("u1")
    view = reader.contexts._working_set().view("u1", model=embedder.name, dim=embedder.dim)
    assert view is not None
    counts = view.line_tokens[key]
    assert len(counts) == len(view.corpus) == 6 and not np.isnan(counts).any()
    after = reader.assemble("u1", "tea", now=now)
    assert (after.text, after.pack_data["items"]) == (before.text, before.pack_data["items"])


def test_one_users_slow_load_does_not_hold_up_another_users_assembly(pg: str) -> None:
    """A user's view is loaded under that user's lock only: while the load of one user
    waits on the database (here: for a lock another transaction holds on `memories`), a
    warm user's assembly, which reads only its change number, is served."""
    settings = load_settings(embedding_model="hashing", database_url=pg)
    embedder = get_embedder(settings)
    with Memlane(settings) as lane:
        lane.add_memory("warm", {"content": "Drinks green tea every morning."})
        lane.add_memory("cold", {"content": "Walks the dog at seven."})
    working = WorkingSet(pg, budget_mb=64)
    assert working.view("warm", model=embedder.name, dim=embedder.dim) is not None
    loaded: list[object] = []
    with get_engine(pg).connect() as blocker:
        blocker.execute(text("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE"))
        loading = threading.Thread(
            target=lambda: loaded.append(
                working.view("cold", model=embedder.name, dim=embedder.dim)
            )
        )
        loading.start()
        try:
            deadline = time.monotonic() + 30
            while not _waits_for_a_lock(pg) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert _waits_for_a_lock(pg), "the cold user's load never reached the table"
            served = queue.Queue[object]()
            threading.Thread(
                target=lambda: served.put(
                    working.view("warm", model=embedder.name, dim=embedder.dim)
                ),
                daemon=True,
            ).start()
            assert served.get(timeout=20) is not None  # one lock for all users waited for "cold"
            assert loading.is_alive() and not loaded
        finally:
            blocker.rollback()
        loading.join(timeout=30)
    assert loaded and loaded[0] is not None


def _waits_for_a_lock(url: str) -> bool:
    with get_engine(url).connect() as conn:
        return bool(
            conn.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND datname = current_database()"
                )
            ).scalar()
        )


def test_a_row_committed_while_the_changes_are_read_is_not_skipped(pg: str, now: datetime) -> None:
    # given a loaded view, and a soul block changed since (so the rows are read table by
    # table, each statement in a snapshot of its own)
    with Memlane(
        load_settings(embedding_model="hashing", database_url=pg, working_set_mb=64)
    ) as lane:
        lane.add_memory("u1", {"content": "Drinks green tea every morning."})
        assert "green tea" in context(lane, now)
        lane.set_soul_block("u1", "style", "Short answers.")
        # when, between the read of the memories and the read of the soul blocks, another
        # writer commits a memory and then a soul block (two later change numbers)
        written: list[str] = []

        def write_between(_conn, _cursor, statement: str, *_args: object) -> None:
            if written or "FROM soul_blocks" not in statement or "change_seq >" not in statement:
                return
            written.append("yes")
            lane.add_memory("u1", {"content": "Walks the dog at seven."})
            lane.set_soul_block("u1", "identity", "A night owl.")

        event.listen(Engine, "before_cursor_execute", write_between)
        try:
            context(lane, now)
        finally:
            event.remove(Engine, "before_cursor_execute", write_between)
        # then the memory the first read could not see reaches the next assembly
        assert written
        assert "dog at seven" in context(lane, now)


def test_each_user_has_a_lock_of_their_own_while_it_is_in_use(pg: str) -> None:
    """No two users share a lock (a shared one made one user's slow load hold up the
    other's assembly), and a user's lock is one object for as long as it is held."""
    working = WorkingSet(pg, budget_mb=64)
    with working.user_lock("u0") as held:
        assert working.user_lock("u0") is held
        others = [working.user_lock(f"u{n}") for n in range(1, 500)]
        assert all(lock is not held for lock in others)
        assert len({id(lock) for lock in others}) == len(others)
