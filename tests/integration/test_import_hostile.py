"""The import door holds as the others do (issue 35, cases 1-6): every row is validated
before anything is written (a bad one is refused naming its line and field: 422 over
HTTP, never 500, exit 1 in the CLI, InvalidRequest in the client); rows cannot reach
another user's data; the user id is stripped; another user's export is copied under
new ids; a purged fact does not come back; a duplicate of an active memory is left out.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from bench.import_peak import PEAK, write_export
from memlane.api.app import create_app
from memlane.client import Client
from memlane.client.errors import InvalidRequest
from memlane.config.settings import load_settings
from memlane.models import migrate
from memlane.models.db import unit_of_work
from memlane.models.tables import Conversation, MemoryEventRow, MemoryRow, Message
from memlane.pipeline.errors import ConflictError, InvalidInputError
from memlane.service.facade import Memlane
from tests.integration.test_cli import cli
from tests.integration.test_client import KEY, Server, server  # noqa: F401 - a fixture

Lines = list[Any]


@pytest.fixture
def lane(db_url: str) -> Iterator[Memlane]:
    with Memlane(load_settings(database_url=db_url)) as lane:
        yield lane


def export_of(lane: Memlane, user: str = "alice", *, messages: bool = False) -> Lines:
    """A small export of `user`: two memories (one forgotten) with history, a soul
    block, a procedure; with `messages` a conversation."""
    if messages:
        lane.enqueue(
            {
                "conversation_id": f"{user}-chat",
                "user_id": user,
                "messages": [{"role": "user", "content": "Hello there."}],
            }
        )
    lane.add_memory(user, {"content": "Drinks oolong after lunch."})
    gone = lane.add_memory(user, {"content": "Keeps a blue notebook."})
    lane.forget(user, gone.id)
    lane.set_soul_block(user, "style", "Answer briefly.")
    lane.add_procedure(user, "deploy", "Run the checks, then tag the release.")
    return [json.loads(line) for line in lane.export_user(user, messages=messages)]


def first(lines: Lines, kind: str) -> dict[str, Any]:
    return next(line["row"] for line in lines if line.get("kind") == kind)


def line_of(lines: Lines, kind: str) -> int:
    return next(n for n, line in enumerate(lines, start=1) if line.get("kind") == kind)


DEEP = '{"a":' * 5000 + "1" + "}" * 5000  # past what json (and json.dumps) recurses into


def text(lines: Lines) -> str:
    body = "\n".join(json.dumps(line) for line in lines) + "\n"
    return body.replace('"__DEEP__"', DEEP)


def stored(url: str) -> dict[str, int]:
    with unit_of_work(url) as session:
        return {
            table.__tablename__: session.query(table).count()
            for table in (MemoryRow, MemoryEventRow, Conversation, Message)
        }


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


# Each hostile change of an export: what it does to the lines, and what the error says.
Change = Callable[[Lines], None]


def _set(kind: str, field: str, value: Any) -> Change:
    return lambda lines: first(lines, kind).update({field: value})


def _drop(kind: str, field: str) -> Change:
    return lambda lines: first(lines, kind).pop(field)


def _repeat(kind: str) -> Change:
    return lambda lines: lines.append(copy.deepcopy(lines[line_of(lines, kind) - 1]))


HOSTILE: dict[str, tuple[Change, str]] = {
    "missing id": (_drop("memories", "id"), r"memories\.id: Field required"),
    "missing ref": (_drop("memories", "ref"), r"memories\.ref: Field required"),
    "missing name": (_drop("procedures", "name"), r"procedures\.name: Field required"),
    "not a time": (_set("memories", "created_at", "yesterday"), r"memories\.created_at"),
    "a time as a number": (_set("memories", "created_at", 1700000000), r"ISO 8601"),
    "status weird": (_set("memories", "status", "weird"), r"memories\.status"),
    "tier god": (_set("memories", "tier", "god"), r"memories\.tier"),
    "unknown category": (_set("memories", "category", "gossip"), r"memories\.category"),
    "unknown soul kind": (_set("soul_blocks", "kind", "mood"), r"soul_blocks\.kind"),
    "importance high": (_set("memories", "importance", "high"), r"memories\.importance"),
    "importance 7.5": (_set("memories", "importance", 7.5), r"less than or equal to 1"),
    "confidence -3": (_set("memories", "confidence", -3), r"memories\.confidence"),
    "negative ref": (_set("memories", "ref", -5), r"memories\.ref"),
    "keywords not a list": (_set("memories", "keywords", "notalist"), r"memories\.keywords"),
    "NUL in content": (_set("memories", "content", "a\x00b"), r"memories\.content.*NUL"),
    "NUL in a soul block": (_set("soul_blocks", "content", "x\x00"), r"soul_blocks\.content"),
    "NaN in a vector": (_set("memories", "embedding", [float("nan")]), r"memories\.embedding\.0"),
    "unknown column": (_set("memories", "owner", "bob"), r"memories\.owner"),
    "another user's row": (_set("memories", "user_id", "bob"), r"memories\.user_id.*bob"),
    "deep detail": (_set("memory_events", "detail", nested(12)), r"memory_events\.detail"),
    "recursion": (_set("memory_events", "detail", "__DEEP__"), r"nested too deeply"),
    "duplicate memory id": (_repeat("memories"), r"memories\.id: .* repeats line"),
    "duplicate soul kind": (_repeat("soul_blocks"), r"soul_blocks\.kind: .* repeats line"),
}


def hostile(export: Lines, name: str) -> tuple[str, str]:
    """The export changed by HOSTILE[name] (as text), and what its error must say."""
    lines = copy.deepcopy(export)
    change, says = HOSTILE[name]
    change(lines)
    return text(lines), says


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_bad_row_is_refused_by_line_and_field_and_nothing_is_written(
    lane: Memlane, db_url: str, name: str
) -> None:
    body, says = hostile(export_of(lane), name)
    before = stored(db_url)
    with pytest.raises(InvalidInputError, match=r"^line \d+: " + f".*{says}"):
        lane.import_user(body.splitlines(), user_id="mallory")
    assert stored(db_url) == before
    assert lane.list_memories("mallory", status=None) == []


def test_invalid_utf8_is_named_by_its_line(lane: Memlane, db_url: str) -> None:
    lines = text(export_of(lane)).encode().splitlines()
    lines.insert(2, b'{"kind": "memories", "row": {"content": "caf\xe9"}}')
    with pytest.raises(InvalidInputError, match=r"^line 3: not UTF-8"):
        lane.import_user(lines, user_id="mallory")
    assert lane.list_memories("mallory", status=None) == []


def test_a_time_without_a_zone_is_read_as_utc_as_at_every_door(lane: Memlane) -> None:
    lines = export_of(lane)
    active = next(line["row"] for line in lines if line.get("row", {}).get("status") == "active")
    active["created_at"] = "2025-03-01T09:30:00"
    lane.import_user(text(lines).splitlines(), user_id="carol")
    (memory,) = lane.list_memories("carol")
    assert memory.created_at.isoformat() == "2025-03-01T09:30:00+00:00"


@pytest.mark.parametrize("name", ["importance 7.5", "missing id", "recursion", "NUL in content"])
def test_the_api_answers_422_naming_the_line_never_500(
    lane: Memlane, db_url: str, name: str
) -> None:
    body, says = hostile(export_of(lane), name)
    with TestClient(create_app(lane), raise_server_exceptions=False) as http:
        answer = http.post("/v1/users/mallory/import", content=body.encode())
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "validation_error"
    assert error["message"].startswith("line ") and re.search(says, error["message"])
    assert lane.list_memories("mallory", status=None) == []


def test_every_hostile_file_answers_422_over_http(pg: str) -> None:
    with Memlane(load_settings(database_url=pg)) as lane:
        export = export_of(lane)
        bodies = {name: hostile(export, name)[0] for name in HOSTILE}
        with TestClient(create_app(lane), raise_server_exceptions=False) as http:
            codes = {
                name: http.post("/v1/users/mallory/import", content=body.encode()).status_code
                for name, body in bodies.items()
            }
            bad = b'{"kind":"memlane-export","version":1,"user_id":"alice"}\n\xff\xfe\n'
            codes["invalid utf-8"] = http.post("/v1/users/m/import", content=bad).status_code
    assert set(codes.values()) == {422}, codes
    assert stored(pg)["memories"] == 2  # alice's own, and nothing of mallory's


def test_the_cli_refuses_a_bad_file_with_its_line(pg: str, tmp_path: Path) -> None:
    with Memlane(load_settings(database_url=pg)) as lane:
        export = export_of(lane)
        bodies = {name: hostile(export, name) for name in ("tier god", "duplicate memory id")}
    for name, (body, says) in bodies.items():
        dump = tmp_path / f"{name}.jsonl"
        dump.write_text(body)
        result = cli(pg, "users", "import", str(dump), "--user", "mallory")
        assert result.exit_code == 2, (name, result.stdout, result.stderr)  # bad input
        assert re.search(r"line \d+: .*" + says, result.stderr), result.stderr
    assert stored(pg)["memories"] == 2


def test_the_client_raises_invalid_request_naming_the_line(server: Server) -> None:  # noqa: F811
    with Client(server.url, api_key=KEY) as memlane:
        memlane.add_memory("client-alice", "Drinks oolong after lunch.")
        lines = [json.loads(line) for line in memlane.export_user("client-alice").splitlines()]
        first(lines, "memories")["status"] = "weird"
        with pytest.raises(InvalidRequest, match=r"line 2: memories\.status"):
            memlane.import_user("client-mallory", text(lines))
        assert memlane.list_memories("client-mallory").memories == []
        # history onto alice's memory from mallory's own file: refused
        first(lines, "memories")["status"] = "active"
        alice_memory = first(lines, "memories")["id"]
        hostile = copy.deepcopy(lines)
        hostile[0]["user_id"] = "client-mallory"
        hostile = [line for line in hostile if line.get("kind") != "memories"]
        for line in hostile[1:]:
            line["row"].pop("user_id", None)
        with pytest.raises(InvalidRequest, match=r"memory_events\.memory_id.*no memory"):
            memlane.import_user("client-mallory", text(hostile))
        # alice's export as bob on the same store: a copy, under new ids
        done = memlane.import_user(" client-bob ", text(lines))
        assert done.user_id == "client-bob" and done.imported["memories"] == 1
        assert done.details == {"copied_with_new_ids": 1}
        (copied,) = memlane.list_memories("client-bob").memories
        assert copied.id != alice_memory and copied.content == "Drinks oolong after lunch."


# --------------------------------------------------------------------------- case 1


def test_rows_cannot_reach_another_users_conversation_memory_or_job(
    lane: Memlane, db_url: str
) -> None:
    bob = export_of(lane, "bob", messages=True)
    bob_chat = first(bob, "conversations")["id"]
    bob_memory = first(bob, "memories")["id"]
    mallory = export_of(lane, "mallory", messages=True)
    before = stored(db_url)

    def refused(change: Change, says: str) -> None:
        lines = copy.deepcopy(mallory)
        change(lines)
        with pytest.raises(InvalidInputError, match=says):
            lane.import_user(text(lines).splitlines(), merge=True)
        assert stored(db_url) == before

    # a message into bob's conversation (not one of the export's)
    refused(_set("messages", "conversation_id", bob_chat), r"no conversation of this export")
    # history written onto bob's memory
    refused(_set("memory_events", "memory_id", bob_memory), r"no memory of this export")

    def purged_event_of_bob(lines: Lines) -> None:
        first(lines, "memory_events").update(memory_id=bob_memory, kind="purged")

    refused(purged_event_of_bob, r"memory_events\.memory_id: .* another user's memory")
    # a memory that claims bob's conversation as its source, or supersession by his memory
    refused(_set("memories", "source_conversation_id", bob_chat), r"another user's conversation")
    refused(_set("memories", "superseded_by", bob_memory), r"another user's memory")
    # bob's conversation row itself in mallory's file is no way in: it becomes a copy
    lines = copy.deepcopy(mallory)
    first(lines, "conversations")["id"] = bob_chat
    first(lines, "messages")["conversation_id"] = bob_chat
    first(lines, "messages")["content"] = "Injected."
    lines = [
        line
        for line in lines
        if line.get("kind") in ("memlane-export", "conversations", "messages")
    ]
    lane.import_user(text(lines).splitlines())
    with unit_of_work(db_url) as session:
        contents = session.query(Message.content).filter(Message.conversation_id == bob_chat).all()
        assert [c for (c,) in contents] == ["Hello there."]
    bobs = lane.list_memories("bob", status=None)
    lane.erase_user("mallory")
    assert lane.list_memories("bob", status=None) == bobs
    with unit_of_work(db_url) as session:
        assert session.query(Conversation).filter(Conversation.user_id == "bob").count() == 1
        assert session.query(Message).filter(Message.conversation_id == bob_chat).count() == 1
        assert session.query(Conversation).filter(Conversation.user_id == "mallory").count() == 0


# --------------------------------------------------------------------------- case 3


def test_the_user_id_is_stripped_as_at_every_door(lane: Memlane, tmp_path: Path) -> None:
    lines = export_of(lane, "alice")
    lines[0]["user_id"] = "  spacey  "
    for line in lines[1:]:
        if "user_id" in line["row"]:
            line["row"]["user_id"] = "  spacey  "
    counts = lane.import_user(text(lines).splitlines())
    assert counts["memories"] == 2
    assert [m.content for m in lane.list_memories("spacey")] == ["Drinks oolong after lunch."]
    counts = lane.import_user(text(export_of(lane, "bert")).splitlines(), user_id="  bert2 ")
    assert [m.content for m in lane.list_memories("bert2")] == ["Drinks oolong after lunch."]
    assert lane.erase_user("spacey")["memories"] == 2


# --------------------------------------------------------------------------- case 4


def test_another_users_export_on_the_same_store_is_copied_under_new_ids(
    lane: Memlane, db_url: str
) -> None:
    lines = export_of(lane, "alice", messages=True)
    alice = {m.id: m for m in lane.list_memories("alice", status=None)}
    counts = lane.import_user(text(lines).splitlines(), user_id="bob")
    assert counts["memories"] == 2 and counts["conversations"] == 1 and counts["messages"] == 1
    copied = lane.list_memories("bob", status=None)
    assert sorted(m.content for m in copied) == sorted(m.content for m in alice.values())
    assert not {m.id for m in copied} & set(alice)
    assert {m.id: m for m in lane.list_memories("alice", status=None)} == alice
    for memory in copied:
        assert lane.memory_history("bob", memory.id)[0].kind == "created"
    # the same copy again: its ids are bob's now; merge adds nothing and says why
    again = lane.import_user(text(lines).splitlines(), user_id="bob", merge=True)
    assert again["memories"] == 0 and again["stored_rows_kept"] > 0
    assert len(lane.list_memories("bob", status=None)) == 2
    # erasing bob leaves alice whole
    lane.erase_user("bob")
    assert {m.id: m for m in lane.list_memories("alice", status=None)} == alice
    with unit_of_work(db_url) as session:
        assert session.query(Conversation).filter(Conversation.user_id == "alice").count() == 1


def test_the_cli_copies_and_says_so(pg: str, tmp_path: Path) -> None:
    with Memlane(load_settings(database_url=pg)) as lane:
        dump = tmp_path / "alice.jsonl"
        dump.write_text(text(export_of(lane, "alice")))
    result = cli(pg, "users", "import", str(dump), "--user", "bob", "--json")
    assert result.exit_code == 0, result.stderr
    assert "3 copied with new ids" in " ".join(result.stderr.split())
    assert "checking" in result.stderr and "lines" in result.stderr  # the progress bar
    assert json.loads(result.stdout)["imported"]["memories"] == 2


def test_stdin_and_rows_out_of_table_order_import_as_the_export_does(db_url: str) -> None:
    # The rows are read twice (checked, then written): stdin is kept for the second
    # reading, and a file whose tables come out of order is written parents first.
    with Memlane(load_settings(database_url=db_url)) as lane:
        lines = export_of(lane, "alice", messages=True)
    shuffled = [lines[0], *reversed(lines[1:])]  # history before memories, messages first
    bad = [*shuffled, {"kind": "memories", "row": {"id": "mem_late"}}]
    before = stored(db_url)
    refused = cli(db_url, "users", "import", "-", "--user", "dora", input=text(bad))
    assert refused.exit_code == 2  # bad input
    assert f"line {len(bad)}: memories." in " ".join(refused.stderr.split())
    assert stored(db_url) == before  # a bad last row: nothing written
    answers = {}
    for user, body in (("dora", shuffled), ("erin", lines)):
        result = cli(db_url, "users", "import", "-", "--user", user, "--json", input=text(body))
        assert result.exit_code == 0, result.stderr
        answers[user] = json.loads(result.stdout)
    assert answers["dora"] == answers["erin"]
    assert answers["dora"]["imported"]["messages"] == 1
    with Memlane(load_settings(database_url=db_url)) as lane:
        dora, erin = (lane.list_memories(u, status=None) for u in ("dora", "erin"))
        assert sorted(m.content for m in dora) == sorted(m.content for m in erin)
        assert len(dora) == 2


# --------------------------------------------------------------------------- cases 5, 6


def test_merge_of_an_export_taken_before_a_purge_keeps_the_purged_fact_out(
    lane: Memlane, now: datetime
) -> None:
    lines = export_of(lane, "alice")
    oolong = next(m for m in lane.list_memories("alice") if "oolong" in m.content)
    lane.purge("alice", oolong.id)
    counts = lane.import_user(text(lines).splitlines(), merge=True)
    assert counts["memories"] == 0 and counts["purged_memories"] == 1
    assert "oolong" not in lane.assemble("alice", "tea", budget_tokens=600, now=now).text
    assert [e.kind for e in lane.memory_history("alice", oolong.id)] == ["purged"]
    # an export taken after the purge holds the purge's event alone: it imports, as a copy too
    after = list(lane.export_user("alice"))
    lane.import_user(after, user_id="alice-copy")
    assert [e.kind for e in lane.memory_history("alice", oolong.id)] == ["purged"]
    # and merged again into alice, that event is not written twice
    assert lane.import_user(after, merge=True)["memory_events"] == 0
    assert [e.kind for e in lane.memory_history("alice", oolong.id)] == ["purged"]


def test_history_is_listed_by_time(lane: Memlane) -> None:
    lines = export_of(lane, "alice")
    memory = first(lines, "memories")
    events = [line for line in lines if line.get("kind") == "memory_events"]
    ours = [e for e in events if e["row"]["memory_id"] == memory["id"]]
    ours[0]["row"]["at"] = "2030-01-01T00:00:00+00:00"  # written first, said last
    lane.import_user(text(lines).splitlines(), user_id="dora")
    (copied,) = [
        m for m in lane.list_memories("dora", status=None) if m.content == memory["content"]
    ]
    times = [e.at for e in lane.memory_history("dora", copied.id)]
    assert times == sorted(times) and times[-1].year == 2030


def test_an_import_does_not_duplicate_an_active_memory(
    lane: Memlane, tmp_path: Path, now: datetime
) -> None:
    lines = export_of(lane, "alice")
    lane.add_memory("erin", {"content": "drinks oolong after lunch"})
    # the same fact twice in one file too
    twin = copy.deepcopy(
        next(line for line in lines if line.get("row", {}).get("status") == "active")
    )
    twin["row"].update(id="mem_twin", ref=99)
    lines.append(twin)
    counts = lane.import_user(text(lines).splitlines(), user_id="erin")
    assert counts["duplicate_memories"] == 2
    context = lane.assemble("erin", "tea", budget_tokens=600, now=now).text
    assert context.lower().count("oolong") == 1


def test_an_edit_that_duplicates_an_active_memory_is_refused(lane: Memlane, now: datetime) -> None:
    lisbon = lane.add_memory("fay", {"content": "User lives in Lisbon."})
    porto = lane.add_memory("fay", {"content": "User lives in Porto."})
    with pytest.raises(ConflictError, match=f"{lisbon.id}.*already says this"):
        lane.update_memory("fay", porto.id, content="User lives in Lisbon.")
    assert lane.get_memory("fay", porto.id).content == "User lives in Porto."
    # editing a memory to say what it says, in other words, is no duplicate of itself
    assert lane.update_memory("fay", lisbon.id, content="user lives in lisbon").content == (
        "user lives in lisbon"
    )
    context = lane.assemble("fay", "where does the user live", budget_tokens=600, now=now).text
    assert context.lower().count("lisbon") == 1


def test_the_cli_and_the_api_refuse_a_duplicating_edit(pg: str) -> None:
    with Memlane(load_settings(database_url=pg)) as lane:
        lane.add_memory("fay", {"content": "User lives in Lisbon."})
        porto = lane.add_memory("fay", {"content": "User lives in Porto."})
        with TestClient(create_app(lane), raise_server_exceptions=False) as http:
            answer = http.patch(
                f"/v1/users/fay/memories/{porto.id}", json={"content": "User lives in Lisbon."}
            )
        assert answer.status_code == 409 and "already says this" in answer.text
    result = cli(
        pg, "memories", "edit", "--user", "fay", porto.id, "--content", "User lives in Lisbon."
    )
    assert result.exit_code == 1 and "already says this" in " ".join(result.stderr.split())


# --------------------------------------------------------------------------- case 7

# The child's peak is its VmHWM (bench.import_peak.PEAK): getrusage's ru_maxrss carries
# the peak of the process it was forked from across exec (Linux keeps it in the signal
# struct), so it reported the pytest worker's size once that had grown past the import's.


def import_peak(url: str, dump: Path) -> tuple[int, str]:
    """The peak (MB) of `memlane users import dump` in a child process, and its stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
    result = subprocess.run(
        [sys.executable, "-c", PEAK, "users", "import", str(dump)],
        env={**env, "MEMLANE_DATABASE_URL": url, "MEMLANE_EMBEDDING_MODEL": "hashing"},
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert result.returncode == 0, result.stderr
    return int(re.findall(r"peak (\d+) MB", result.stderr)[-1]), " ".join(result.stderr.split())


def test_a_large_import_stays_in_bounded_memory(sqlite_url: str, tmp_path: Path) -> None:
    # one embedder named on both sides: vectors of another would be computed again, and
    # this test is about the import's own memory, not a re-embedding's
    with Memlane(load_settings(database_url=sqlite_url, embedding_model="hashing")) as lane:
        dim, model = lane.embedder.dim, lane.embedder.name
    peaks = {}
    for memories in (5_000, 10_000):
        dump = tmp_path / f"big-{memories}.jsonl"
        write_export(dump, memories, dim, model)
        url = f"sqlite:///{tmp_path / f'store-{memories}.db'}"
        migrate.upgrade(url)
        peaks[memories], said = import_peak(url, dump)
        assert f"imported {memories} memories, {memories} memory_events" in said
        dump.unlink()
    # The rows are read twice (checked, then written in batches) and only ids and keys
    # kept between: 10,000 more memories (and events) cost 17-19 MB, ~1.8 KB each
    # (SQLite: 125 and 142 MB in python -m bench.import_peak --backend sqlite --sizes
    # 10000 20000); the version that held every row until the write took 43-74 MB more
    # (151 and 194 MB here, 178 and 252 MB in the bench). 5,000 more: ~9 MB against
    # 21-37 MB (half the sizes: the test took a minute at 10,000 and 20,000).
    assert peaks[10_000] - peaks[5_000] < 16, peaks
    assert peaks[10_000] < 330, peaks
