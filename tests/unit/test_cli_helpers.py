"""The CLI's pure helpers: error lines and exit codes, --now, --batch lines and the celery
worker command line."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import BaseModel, Field, ValidationError

from memlane.cli.assemble import read_batch
from memlane.cli.common import exit_code_for, one_line, parse_now
from memlane.cli.ops import parse_queues, worker_command
from memlane.pipeline.errors import (
    BudgetError,
    ConfigurationError,
    MemlaneError,
    NotFoundError,
    TranscriptError,
)


class _Model(BaseModel):
    importance: float = Field(le=1.0)
    name: str


def test_one_line_lists_pydantic_fields_and_keeps_only_a_first_line() -> None:
    with pytest.raises(ValidationError) as raised:
        _Model.model_validate({"importance": 3})
    assert one_line(raised.value) == (
        "importance: Input should be less than or equal to 1; name: Field required"
    )
    assert one_line(RuntimeError("first\nsecond")) == "first"
    assert one_line(RuntimeError()) == "RuntimeError"


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (TranscriptError("x"), 2),
        (ConfigurationError("x"), 2),
        (ValueError("x"), 2),
        (BudgetError("x", budget=1, required=2), 1),
        (NotFoundError("x"), 1),
        (MemlaneError("x"), 1),
        (OSError("x"), 1),
    ],
)
def test_bad_input_exits_2_and_failed_work_exits_1(error: Exception, code: int) -> None:
    assert exit_code_for(error) == code


def test_now_is_iso_8601_and_utc_when_it_has_no_zone() -> None:
    assert parse_now(None) is None
    assert parse_now("2026-03-01T12:00:00") == datetime(2026, 3, 1, 12, tzinfo=UTC)
    plus_two = parse_now("2026-03-01T12:00:00+02:00")
    assert plus_two == datetime(2026, 3, 1, 10, tzinfo=UTC)
    assert plus_two is not None and plus_two.utcoffset() == timedelta(hours=2)
    with pytest.raises(ValueError, match="--now: not an ISO 8601 time: 'yesterday'"):
        parse_now("yesterday")


def test_batch_lines_are_numbered_as_in_the_file_and_validated_first(tmp_path: Path) -> None:
    good = tmp_path / "q.jsonl"
    good.write_text(
        '{"user_id": "u1", "query": "stack?", "budget": 500}\n'
        "\n"
        '{"user_id": "u2", "strategy": "recent", "now": "2026-03-01T12:00:00"}\n',
        encoding="utf-8",
    )
    queries = read_batch(good)
    assert [(n, q.user_id) for n, q in queries] == [(1, "u1"), (3, "u2")]
    assert queries[1][1].now == datetime(2026, 3, 1, 12, tzinfo=UTC)

    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"user_id": "u1"}\n{"user_id": "u1", "budget": 10, "context_window": 9000}\n',
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match=r"bad.jsonl line 2: give budget or context_window"):
        read_batch(bad)
    bad.write_text('{"user_id": "u1", "strategy": "loud"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 1: strategy: Input should be 'scored'"):
        read_batch(bad)


def test_an_extract_worker_defaults_to_32_threads() -> None:
    command = worker_command(["extract"], pool=None, concurrency=None, beat=False, loglevel="INFO")
    assert command[:6] == [sys.executable, "-m", "celery", "-A", "memlane.workers.app", "worker"]
    joined = " ".join(command[6:])
    assert joined == "-Q extract -E -P threads -l INFO -n memlane-extract@%h -c 32"


def test_other_workers_default_to_prefork_and_options_win() -> None:
    store = worker_command(
        ["ingest", "store"], pool=None, concurrency=None, beat=True, loglevel="INFO"
    )
    assert (
        " ".join(store[6:]) == "-Q ingest,store -E -P prefork -l INFO -n memlane-ingest-store@%h -B"
    )
    chosen = worker_command(
        ["extract"], pool="prefork", concurrency=4, beat=False, loglevel="DEBUG"
    )
    assert " ".join(chosen[6:]) == "-Q extract -E -P prefork -l DEBUG -n memlane-extract@%h -c 4"


def test_queues_are_checked_and_deduplicated() -> None:
    assert parse_queues("extract, store,extract") == ["extract", "store"]
    with pytest.raises(ValueError, match="unknown queue fast; choose from ingest,extract,store"):
        parse_queues("extract,fast")
    with pytest.raises(ValueError, match="none given"):
        parse_queues(" , ")
