"""Export and import of a user: SQLite → PostgreSQL → SQLite gives byte-identical
contexts for the same queries and `now`; ids, short ids, counts and histories are kept;
an import that meets stored ids refuses unless told to merge; vectors of another embedder
are computed again. CLI and API too."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from memlane.api.app import create_app
from memlane.config.settings import load_settings
from memlane.models import migrate
from memlane.models.db import unit_of_work
from memlane.models.tables import MemoryRow
from memlane.pipeline.errors import ConflictError, InvalidInputError
from memlane.service.facade import Memlane
from tests.integration.test_cli import cli

QUERIES = (None, "where does the user live?", "tea or coffee", "how do I deploy?")


def fill(lane: Memlane) -> None:
    for conversation, texts in {
        "c1": ["I prefer green tea over coffee.", "I live in Zanzibarville."],
        "c2": ["I prefer green tea over coffee.", "I work as a lighthouse keeper."],
        "c3": ["I no longer prefer green tea over coffee."],
    }.items():
        messages = []
        for text in texts:
            messages += [{"role": "user", "content": text}, {"role": "assistant", "content": "Ok."}]
        lane.enqueue(
            {"conversation_id": conversation, "user_id": "u1", "messages": messages, "final": True}
        )
        lane.flush()
    pinned = lane.add_memory("u1", {"content": "User's name is Maya.", "tier": "pinned"})
    lane.update_memory("u1", pinned.id, importance=0.95)
    gone = lane.add_memory("u1", {"content": "Keeps a blue notebook."})
    lane.forget("u1", gone.id)
    lane.set_soul_block("u1", "style", "Answer briefly.")
    lane.add_procedure("u1", "deploy", "Run the checks, then tag the release.")
    lane.add_memory("u2", {"content": "Another user's fact."})


def contexts(lane: Memlane, now: datetime) -> list[str]:
    return [lane.assemble("u1", query, budget_tokens=600, now=now).text for query in QUERIES]


def moved(source: Memlane, target: Memlane, **options: bool) -> dict[str, int]:
    return target.import_user(list(source.export_user("u1", **options)))


def test_a_round_trip_sqlite_postgresql_sqlite_gives_the_same_contexts(
    sqlite_url: str, pg: str, tmp_path: Path, now: datetime
) -> None:
    back_url = f"sqlite:///{tmp_path / 'back.db'}"
    migrate.upgrade(back_url)
    with (
        Memlane(load_settings(database_url=sqlite_url)) as first,
        Memlane(load_settings(database_url=pg)) as middle,
        Memlane(load_settings(database_url=back_url)) as last,
    ):
        fill(first)
        expected = contexts(first, now)
        assert "Zanzibarville" in expected[1] and "Answer briefly." in expected[0]
        counts = moved(first, middle, messages=True)
        assert counts["memories"] == len(first.list_memories("u1", status=None))
        assert counts["messages"] == 10 and counts["conversations"] == 3
        assert contexts(middle, now) == expected
        moved(middle, last, messages=True)
        assert contexts(last, now) == expected
        for lane in (middle, last):
            assert lane.list_memories("u1", status=None) == first.list_memories("u1", status=None)
            assert lane.soul_blocks("u1") == first.soul_blocks("u1")
            assert lane.procedures("u1") == first.procedures("u1")
            assert lane.list_memories("u2") == []  # only the user exported
        for memory in first.list_memories("u1", status=None):
            theirs = [
                (e.kind, e.actor, e.at, e.detail) for e in last.memory_history("u1", memory.id)
            ]
            ours = [
                (e.kind, e.actor, e.at, e.detail) for e in first.memory_history("u1", memory.id)
            ]
            assert theirs == ours
        # the imported store goes on as the first would: the same fact confirms, not copies
        again = last.add_memory("u1", {"content": "User's name is Maya."})
        assert again.access_count == 2
        new = last.add_memory("u1", {"content": "Sails on Sundays."})
        assert new.ref == max(m.ref for m in first.list_memories("u1", status=None)) + 2  # +proc


def test_stored_ids_refuse_an_import_unless_merged(sqlite_url: str, tmp_path: Path) -> None:
    other_url = f"sqlite:///{tmp_path / 'other.db'}"
    migrate.upgrade(other_url)
    with (
        Memlane(load_settings(database_url=sqlite_url)) as source,
        Memlane(load_settings(database_url=other_url)) as target,
    ):
        a = source.add_memory("u1", {"content": "Drinks oolong after lunch."})
        source.set_soul_block("u1", "identity", "A tutor.")
        lines = list(source.export_user("u1"))
        assert target.import_user(lines)["memories"] == 1
        with pytest.raises(ConflictError, match="merge"):
            target.import_user(lines)
        b = source.add_memory("u1", {"content": "Walks the dog at seven."})
        merged = target.import_user(list(source.export_user("u1")), merge=True)
        assert (merged["memories"], merged["soul_blocks"]) == (1, 0)
        assert {m.id for m in target.list_memories("u1")} == {a.id, b.id}
        # ids are unique across users of a store: another user's import is a copy
        copied = target.import_user(lines, user_id="u9")
        assert copied["memories"] == 1 and copied["copied_with_new_ids"] == 1
        (copy,) = target.list_memories("u9")
        assert copy.content == a.content and copy.id not in {a.id, b.id}
        assert {m.id for m in target.list_memories("u1")} == {a.id, b.id}
        with pytest.raises(InvalidInputError, match="not a memlane export"):
            target.import_user(['{"kind": "memories", "row": {}}'])
        with pytest.raises(InvalidInputError, match="line 2"):
            target.import_user([lines[0], "{not json"])


def test_short_ids_the_user_has_taken_are_renumbered(sqlite_url: str, tmp_path: Path) -> None:
    other_url = f"sqlite:///{tmp_path / 'other.db'}"
    migrate.upgrade(other_url)
    with (
        Memlane(load_settings(database_url=sqlite_url)) as source,
        Memlane(load_settings(database_url=other_url)) as target,
    ):
        exported = source.add_memory("u1", {"content": "Drinks oolong after lunch."})
        own = target.add_memory("u1", {"content": "Walks the dog at seven."})
        assert exported.ref == own.ref == 1
        target.import_user(list(source.export_user("u1")))
        assert target.get_memory("u1", exported.id).ref == 2
        assert target.add_memory("u1", {"content": "Sails on Sundays."}).ref == 3


def test_vectors_of_another_embedder_are_computed_again(sqlite_url: str, tmp_path: Path) -> None:
    other_url = f"sqlite:///{tmp_path / 'other.db'}"
    migrate.upgrade(other_url)
    with (
        Memlane(load_settings(database_url=sqlite_url)) as source,
        Memlane(
            load_settings(database_url=other_url, embedding_model="hashing", embedding_dim=128)
        ) as target,
    ):
        memory = source.add_memory("u1", {"content": "Drinks oolong after lunch."})
        target.import_user(list(source.export_user("u1")))
        with unit_of_work(other_url) as session:
            row = session.get(MemoryRow, memory.id)
            assert row is not None and row.embedding_dim == 128
            assert row.embedding == pytest.approx(target.embedder.embed([row.content])[0])


def test_the_cli_and_the_api_export_and_import(sqlite_url: str, tmp_path: Path) -> None:
    with Memlane(load_settings(database_url=sqlite_url)) as lane:
        lane.add_memory("u1", {"content": "Drinks oolong after lunch."})
    exported = cli(sqlite_url, "users", "export", "--user", "u1")
    assert exported.exit_code == 0
    records = [json.loads(line) for line in exported.stdout.splitlines()]
    assert [r["kind"] for r in records] == ["memlane-export", "memories", "memory_events"]
    dump = tmp_path / "u1.jsonl"
    dump.write_text(exported.stdout)
    other_url = f"sqlite:///{tmp_path / 'other.db'}"
    migrate.upgrade(other_url)
    imported = cli(other_url, "users", "import", str(dump))
    assert imported.exit_code == 0 and "1 memories" in imported.stderr
    assert cli(other_url, "users", "import", str(dump)).exit_code == 1  # taken: refused
    assert cli(other_url, "users", "import", str(dump), "--merge").exit_code == 0

    third_url = f"sqlite:///{tmp_path / 'third.db'}"
    migrate.upgrade(third_url)
    with (
        Memlane(load_settings(database_url=other_url)) as source,
        Memlane(load_settings(database_url=third_url)) as target,
        TestClient(create_app(source)) as out,
        TestClient(create_app(target)) as into,
    ):
        answer = out.get("/v1/users/u1/export")
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("application/x-ndjson")
        done = into.post("/v1/users/u1/import", content=answer.content)
        assert done.status_code == 200 and done.json()["imported"]["memories"] == 1
        assert into.post("/v1/users/u1/import", content=answer.content).status_code == 409
        merged = into.post("/v1/users/u1/import?merge=true", content=answer.content)
        assert merged.status_code == 200
        assert [m.content for m in target.list_memories("u1")] == ["Drinks oolong after lunch."]


def test_a_copy_as_another_user_on_the_same_store_gives_the_same_contexts(
    pg: str, now: datetime
) -> None:
    with Memlane(load_settings(database_url=pg)) as lane:
        fill(lane)
        expected = contexts(lane, now)
        counts = lane.import_user(list(lane.export_user("u1", messages=True)), user_id="u9")
        assert counts["episodes"] == 3 and counts["conversations"] == 3
        copied = [lane.assemble("u9", q, budget_tokens=600, now=now).text for q in QUERIES]
        # the same items (equal scores may order differently: ties go by id, and ids differ)
        assert [sorted(t.replace('"u9"', '"u1"').splitlines()) for t in copied] == [
            sorted(t.splitlines()) for t in expected
        ]
        assert contexts(lane, now) == expected  # u1 untouched
        lane.erase_user("u9")
        assert contexts(lane, now) == expected
        lane.delete_conversation("u1", "c1")  # u1's own conversation, not the copy's
