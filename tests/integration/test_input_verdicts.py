"""One verdict for every input, on both backends and at every door (facade, CLI, HTTP):
texts a backend cannot store (NUL, lone surrogates), user ids that cannot be a URL path
segment, times without a zone, numbers out of range, taken names, JSON too deep, bodies
that are not JSON. Refused input writes nothing; accepted input is the same on both."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, text

from memlane.api.app import create_app
from memlane.models.db import get_engine
from memlane.models.tables import Message
from memlane.pipeline.errors import ConflictError, InvalidInputError, TranscriptError
from memlane.service.facade import Memlane
from tests.integration.test_cli import cli

NUL, SURROGATE = "\x00", "\ud800"


@pytest.fixture
def client(lane: Memlane) -> Iterator[TestClient]:
    with TestClient(create_app(lane)) as client:
        yield client


def transcript(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "conversation_id": "c1",
        "user_id": "u1",
        "messages": [
            {"role": "user", "content": "I prefer tea.", "created_at": "2026-01-10T10:00:00"},
            {"role": "assistant", "content": "Noted."},
        ],
    }
    body.update(changes)
    return body


def rows(url: str, table: str) -> int:
    with get_engine(url).connect() as conn:
        return int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())


def test_a_time_without_a_zone_is_read_as_utc(lane: Memlane, client: TestClient) -> None:
    lane.enqueue(transcript())
    assert client.post("/v1/transcripts", json=transcript(conversation_id="c2")).status_code == 202
    with get_engine(lane.url).connect() as conn:
        stamps = list(
            conn.execute(
                select(Message.created_at).where(Message.content == "I prefer tea.")
            ).scalars()
        )
    assert stamps == [datetime(2026, 1, 10, 10, tzinfo=UTC)] * 2
    memory = lane.add_memory("u1", {"content": "Likes tea.", "expires_at": "2030-01-01T00:00"})
    assert memory.expires_at == datetime(2030, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("bad", [NUL, SURROGATE])
def test_unstorable_text_is_refused_at_every_door(
    lane: Memlane, client: TestClient, db_url: str, bad: str
) -> None:
    for field, body in (
        ("user_id", transcript(user_id=f"u{bad}")),
        ("messages.0.content", transcript(messages=[{"role": "user", "content": f"a{bad}"}])),
    ):
        with pytest.raises(TranscriptError, match=field.replace(".", r"\.")):
            lane.enqueue(body)
        answer = client.post(
            "/v1/transcripts",
            content=json.dumps(body, ensure_ascii=True),
            headers={"content-type": "application/json"},
        )
        assert answer.status_code == 422 and field in answer.json()["error"]["message"]
    with pytest.raises(InvalidInputError, match="user_id"):
        lane.assemble(f"u{bad}", "tea")
    with pytest.raises(InvalidInputError, match="query"):
        lane.assemble("u1", f"tea{bad}")
    with pytest.raises(InvalidInputError, match="memory_id"):
        lane.get_memory("u1", f"mem{bad}")
    with pytest.raises(ValueError, match="content"):
        lane.add_memory("u1", {"content": f"tea{bad}"})
    with pytest.raises(InvalidInputError, match="content"):
        lane.set_soul_block("u1", "style", f"short{bad}")
    for path, body in (
        ("/v1/context", {"user_id": f"u{bad}", "query": "tea"}),
        ("/v1/context", {"user_id": "u1", "query": f"tea{bad}"}),
        ("/v1/users/u1/memories", {"content": f"tea{bad}"}),
        ("/v1/users/u1/procedures", {"name": "brew", "content": f"hot{bad}"}),
    ):
        answer = client.post(
            path,
            content=json.dumps(body, ensure_ascii=True),
            headers={"content-type": "application/json"},
        )
        assert answer.status_code == 422, (path, answer.text)
        assert answer.json()["error"]["code"] == "validation_error"
    if bad == NUL:  # a path can carry a NUL, not a lone surrogate
        answer = client.get("/v1/users/u%00/memories")
        assert answer.status_code == 422 and "user_id" in answer.json()["error"]["message"]
        result = cli(db_url, "memories", "list", "--user", "u\x00")
        assert result.exit_code == 2 and "user_id: contains a NUL" in result.output
    assert rows(db_url, "messages") == rows(db_url, "memories") == 0


def test_a_user_id_cannot_hold_a_slash(lane: Memlane, client: TestClient) -> None:
    with pytest.raises(TranscriptError, match="user_id"):
        lane.enqueue(transcript(user_id="team/ana"))
    with pytest.raises(InvalidInputError, match="'/'"):
        lane.add_memory("team/ana", {"content": "Likes tea."})
    answer = client.post("/v1/context", json={"user_id": "team/ana"})
    assert answer.status_code == 422 and "'/'" in answer.text


def test_numbers_out_of_range_are_usage_errors(
    lane: Memlane, client: TestClient, db_url: str
) -> None:
    for field in ("budget_tokens", "context_window", "output_headroom"):
        answer = client.post("/v1/context", json={"user_id": "u1", field: 10**30})
        assert answer.status_code == 422 and field in answer.text
    with pytest.raises(ValueError, match="from 1 to 100,000,000"):
        lane.assemble("u1", "tea", budget_tokens=10**30)
    for flag in ("--budget", "--context-window"):
        result = cli(db_url, "assemble", "--user", "u1", flag, str(10**30))
        assert result.exit_code == 2, result.output
    result = cli(db_url, "assemble", "--user", "u1", "--budget", "1e30")
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_a_taken_procedure_name_is_a_conflict(lane: Memlane, client: TestClient) -> None:
    lane.add_procedure("u1", "brew", "Water at 80 degrees.")
    with pytest.raises(ConflictError, match="already has a procedure named 'brew'"):
        lane.add_procedure("u1", "brew", "Boiling water.")
    answer = client.post("/v1/users/u1/procedures", json={"name": "brew", "content": "Boil."})
    assert answer.status_code == 409 and answer.json()["error"]["code"] == "conflict"
    assert [p.content for p in lane.procedures("u1")] == ["Water at 80 degrees."]


def test_json_lines_end_at_newlines_only(db_url: str, tmp_path: Path) -> None:
    first = transcript(messages=[{"role": "user", "content": "Ana\u2028Lee\u2029is\u0085here."}])
    second = transcript(conversation_id="c2")
    path = tmp_path / "two.jsonl"
    path.write_text(
        json.dumps(first, ensure_ascii=False) + "\r\n" + json.dumps(second) + "\n",
        encoding="utf-8",
    )
    result = cli(db_url, "enqueue", str(path))
    assert result.exit_code == 0, result.output
    assert rows(db_url, "conversations") == 2


def test_json_nested_too_deeply_is_refused_on_both_doors(
    client: TestClient, db_url: str, tmp_path: Path
) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    path = tmp_path / "deep.json"
    path.write_text(deep, encoding="utf-8")
    result = cli(db_url, "enqueue", str(path))
    assert result.exit_code == 2 and "nested" in result.output, result.output
    answer = client.post(
        "/v1/transcripts", content=deep, headers={"content-type": "application/json"}
    )
    assert answer.status_code == 422 and "nested" in answer.json()["error"]["message"]
    assert rows(db_url, "messages") == 0


def test_a_body_that_is_not_json_is_told_so(client: TestClient) -> None:
    for headers, content in (
        ({"content-type": "text/plain"}, json.dumps(transcript())),
        ({"content-type": "application/x-www-form-urlencoded"}, "user_id=u1"),
    ):
        for path in ("/v1/transcripts", "/v1/context", "/v1/users/u1/memories"):
            answer = client.post(path, content=content, headers=headers)
            assert answer.status_code == 422, path
            assert "Content-Type: application/json" in answer.json()["error"]["message"]


def test_files_are_read_as_the_api_reads_bodies(
    client: TestClient, db_url: str, tmp_path: Path
) -> None:
    body = json.dumps(transcript())
    for name, raw in (
        ("bom.json", b"\xef\xbb\xbf" + body.encode()),
        ("utf16.json", body.encode("utf-16")),
    ):
        (tmp_path / name).write_bytes(raw)
        result = cli(db_url, "enqueue", str(tmp_path / name))
        assert result.exit_code == 0, (name, result.output)
        answer = client.post(
            "/v1/transcripts", content=raw, headers={"content-type": "application/json"}
        )
        assert answer.status_code == 202, (name, answer.text)


def test_tables_do_not_print_terminal_escapes(lane: Memlane, db_url: str) -> None:
    lane.add_memory("u1", {"content": "Likes \x1b[31mred\x1b[0m tea."})
    result = cli(db_url, "memories", "list", "--user", "u1")
    assert result.exit_code == 0
    assert "\x1b" not in result.output and "\\x1b[31mred" in result.output


def test_a_batch_is_written_whole_or_not_at_all(lane: Memlane, db_url: str, tmp_path: Path) -> None:
    def with_ids(conversation: str, text: str) -> dict[str, Any]:
        return transcript(
            conversation_id=conversation,
            messages=[{"id": "m1", "role": "user", "content": text}],
        )

    lane.enqueue(with_ids("c1", "I prefer tea."))
    batch = tmp_path / "batch.jsonl"
    # the second line passes validation and fails only against the store: m1 changed
    lines = [with_ids("c2", "I like maps."), with_ids("c1", "I prefer coffee.")]
    batch.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    before = (rows(db_url, "conversations"), rows(db_url, "messages"), rows(db_url, "jobs"))
    result = cli(db_url, "enqueue", str(batch))
    assert result.exit_code == 2
    assert f"{batch} line 2" in result.output and "nothing of the batch" in result.output
    assert (rows(db_url, "conversations"), rows(db_url, "messages"), rows(db_url, "jobs")) == (
        before
    )
    with pytest.raises(TranscriptError, match="transcript 1 of the batch"):
        lane.enqueue_many(lines)
    assert rows(db_url, "conversations") == before[0]
    results = lane.enqueue_many([lines[0], with_ids("c3", "I run.")])
    assert [r.stored_messages for r in results] == [1, 1]


@pytest.mark.parametrize(
    ("field", "body"),
    [
        ("user_id: contains a NUL", transcript(user_id="u\x00")),
        ("user_id: contains a lone surrogate", transcript(user_id="u\udfff")),
        ("user_id: contains '/'", transcript(user_id="team/ana")),
        ("conversation_id: contains a NUL", transcript(conversation_id="c\x00")),
        (
            "messages.0.content: contains a lone surrogate",
            transcript(messages=[{"role": "user", "content": "tea \ud800"}]),
        ),
    ],
)
def test_the_cli_and_the_api_give_one_verdict_on_a_file(
    client: TestClient, db_url: str, tmp_path: Path, field: str, body: dict[str, Any]
) -> None:
    raw = json.dumps(body, ensure_ascii=True).encode()
    (tmp_path / "bad.json").write_bytes(raw)
    result = cli(db_url, "enqueue", str(tmp_path / "bad.json"))
    assert result.exit_code == 2 and field in result.output, result.output
    assert "Value error" not in result.output and "Error:" not in result.output
    answer = client.post(
        "/v1/transcripts", content=raw, headers={"content-type": "application/json"}
    )
    assert answer.status_code == 422 and field in answer.json()["error"]["message"]
    assert rows(db_url, "messages") == rows(db_url, "conversations") == 0


def test_a_time_without_a_zone_is_utc_through_the_cli_too(db_url: str, tmp_path: Path) -> None:
    (tmp_path / "naive.json").write_text(json.dumps(transcript()), encoding="utf-8")
    result = cli(db_url, "enqueue", str(tmp_path / "naive.json"))
    assert result.exit_code == 0, result.output
    with get_engine(db_url).connect() as conn:
        stamp = conn.execute(
            select(Message.created_at).where(Message.content == "I prefer tea.")
        ).scalar_one()
    assert stamp.replace(tzinfo=stamp.tzinfo or UTC) == datetime(2026, 1, 10, 10, tzinfo=UTC)


def test_a_user_id_is_read_alike_at_every_door(
    lane: Memlane, client: TestClient, db_url: str
) -> None:
    lane.add_memory(" u1 ", {"content": "Likes green tea."})  # stripped, as the API strips
    assert [m.user_id for m in lane.list_memories("u1")] == ["u1"]
    assert "green tea" in lane.assemble("  u1", "tea").text
    answer = client.post("/v1/context", json={"user_id": "u1 ", "query": "tea"})
    assert "green tea" in answer.json()["context"]
    for bad in ("", "   ", "u" * 201):
        with pytest.raises(InvalidInputError, match="user_id"):
            lane.assemble(bad, "tea")
        answer = client.post("/v1/context", json={"user_id": bad, "query": "tea"})
        assert answer.status_code == 422 and "user_id" in answer.text
        result = cli(db_url, "assemble", "--user", bad, "--query", "tea")
        assert result.exit_code == 2 and "user_id" in result.output, result.output


def test_a_body_that_is_json_but_not_an_object_says_what_it_is(client: TestClient) -> None:
    for body, kind in (("[{}]", "a list"), ("null", "null"), ("7", "a number")):
        answer = client.post(
            "/v1/transcripts", content=body, headers={"content-type": "application/json"}
        )
        message = answer.json()["error"]["message"]
        assert answer.status_code == 422 and f"must be a JSON object, not {kind}" in message
        assert "one transcript per request" in message
    answer = client.post("/v1/context", content="[]", headers={"content-type": "application/json"})
    assert "must be a JSON object, not a list" in answer.json()["error"]["message"]


def test_a_bad_option_is_one_line_naming_it(db_url: str) -> None:
    for args, named in (
        (["assemble", "--user", "u1", "--budget", "1e30"], "'--budget'"),
        (["assemble", "--user", "u1", "--strategy", "bogus"], "'--strategy'"),
        (["memories", "add", "--user", "u1"], "'--content'"),
    ):
        result = cli(db_url, *args)
        lines = result.output.strip().splitlines()
        assert result.exit_code == 2 and len(lines) == 1, result.output
        assert lines[0].startswith("error: ") and named in lines[0]
        assert "Value error" not in lines[0] and "--help" in lines[0]
