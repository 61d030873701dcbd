"""The bad-input drill as a test: every malformed transcript of tests/data/bad_transcripts/
(plus three made at run time: 10 MB, one character over the limit, 5,001 messages) is
refused by `memlane enqueue` (exit 2, an error line naming the fault) and by
POST /v1/transcripts (422 or 413 in the API's error shape), and writes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.common import table_counts
from bench.drills.bad_input import CASES, CORPUS, TABLES, api_client, cli_outcome, generated_files

EMPTY = dict.fromkeys(TABLES, 0)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    made = generated_files(tmp_path_factory.mktemp("bad_transcripts"))
    return {p.name: p for p in [*CORPUS.iterdir(), *made]}


@pytest.fixture(scope="module")
def api(pg_url: str) -> Iterator[Any]:
    with api_client(pg_url) as client:
        yield client


def test_the_corpus_is_what_the_drill_expects(files: dict[str, Path]) -> None:
    assert len(files) >= 20
    assert sorted(files) == sorted(CASES)  # no file untested, no case without its file
    assert (files["90_ten_megabyte_message.json"]).stat().st_size > 10_000_000


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_cli_refuses_it_and_writes_nothing(name: str, files: dict[str, Path], pg: str) -> None:
    code, stderr = cli_outcome(files[name], pg, in_process=True)
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert code == 2, stderr
    assert len(errors) == 1 and CASES[name].cli.lower() in errors[0].lower(), stderr
    assert table_counts(pg, TABLES) == EMPTY


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_api_refuses_it_and_writes_nothing(
    name: str, files: dict[str, Path], api: Any, pg: str
) -> None:
    response = api.post(
        "/v1/transcripts",
        content=files[name].read_bytes(),
        headers={"content-type": "application/json"},
    )
    assert response.status_code == CASES[name].http, response.text[:300]
    error = response.json()["error"]
    assert error["code"] in {"invalid_transcript", "message_too_large", "body_too_large"}
    assert CASES[name].api.lower() in f"{error['code']}: {error['message']}".lower()
    assert table_counts(pg, TABLES) == EMPTY
