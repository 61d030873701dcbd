"""Drill: malformed transcripts are refused with a clear error by both front doors, and
nothing is written.

The corpus is tests/data/bad_transcripts/ (one file per fault) plus four files made at
run time (a 10 MB message, a message one character over the limit, 5,001 messages, JSON
nested 100,000 levels deep).
Each goes to `memlane enqueue FILE` (expect exit 2 and an `error:` line naming the
fault) and to POST /v1/transcripts (expect 422, or 413 for the sizes, in the API's error
shape naming the fault). Afterwards the database holds no conversation, message, job,
memory or episode.

    python -m bench.drills.bad_input               # the CLI in real processes
    python -m bench.drills.bad_input --in-process  # Typer's runner: a few seconds
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import ROOT, env_for_children, pg_database, table_counts, truncate
from bench.drills.common import Verdict
from memlane.models.schemas import MAX_MESSAGE_CHARS, MAX_MESSAGES_PER_TRANSCRIPT

CORPUS = ROOT / "tests" / "data" / "bad_transcripts"
TABLES = ("conversations", "messages", "jobs", "memories", "episodes")


@dataclass(frozen=True)
class Case:
    http: int  # the status POST /v1/transcripts must answer
    cli: str  # a fragment the CLI's error line must hold (case-insensitive)
    api: str  # a fragment the API's error message must hold


def _same(status: int, fragment: str) -> Case:
    return Case(status, fragment, fragment)


CASES: dict[str, Case] = {
    "01_invalid_json.json": _same(422, "json"),
    "02_trailing_garbage.json": _same(422, "json"),
    "03_not_an_object.json": Case(422, "expected a transcript object", "must be a JSON object"),
    "04_null.json": Case(422, "expected a transcript object", "must be a JSON object"),
    "05_empty_list.json": Case(422, "list of transcripts is empty", "one transcript per request"),
    "06_missing_user_id.json": _same(422, "user_id"),
    "07_missing_conversation_id.json": _same(422, "conversation_id"),
    "08_missing_messages.json": _same(422, "messages: field required"),
    "09_empty_messages.json": _same(422, "messages: list should have at least 1"),
    "10_unknown_role.json": _same(422, "messages.0.role"),
    "11_empty_content.json": _same(422, "content is empty"),
    "12_blank_content.json": _same(422, "content is empty"),
    "13_nul_escaped.json": _same(422, "NUL"),
    "14_nul_raw.json": _same(422, "json"),
    "15_invalid_utf8.json": _same(422, "UTF-8"),
    "16_duplicate_ids_different_text.json": _same(422, "messages.2.id"),
    "17_ids_on_some_messages.json": _same(422, "messages.1.id"),
    "18_wrong_type_user_id.json": _same(422, "user_id: input should be a valid string"),
    "19_wrong_type_messages.json": _same(422, "messages: input should be a valid list"),
    "20_message_not_an_object.json": _same(422, "messages.0: input should be a valid dictionary"),
    "21_wrong_type_content.json": _same(422, "messages.0.content"),
    "22_wrong_type_role.json": _same(422, "messages.0.role"),
    "23_wrong_type_final.json": _same(422, "final"),
    "24_bad_created_at.json": _same(422, "messages.0.created_at"),
    "25_unknown_field.json": _same(422, "priority"),
    "26_wrong_type_everywhere.json": _same(422, "conversation_id"),
    "27_blank_user_id.json": _same(422, "user_id"),
    "28_conversation_id_too_long.json": _same(422, "conversation_id"),
    "29_good_then_bad.jsonl": Case(422, "line 2", "json"),
    "30_empty_file.json": Case(422, "empty", "body"),
    "31_message_id_empty.json": _same(422, "messages.0.id"),
    "32_content_null.json": _same(422, "messages.0.content"),
    # chat formats: a list of parts is valid (OpenAI / Anthropic), a malformed one is not
    "33_part_without_type.json": _same(422, "content.0: a content part must be an object"),
    "34_text_part_not_a_string.json": _same(422, "content.0.text"),
    "35_format_mismatch.json": _same(422, "messages.1 has an anthropic shape"),
    "36_unknown_format.json": _same(422, "format"),
    "37_empty_parts.json": _same(422, "content is empty"),
    # texts one backend could not store, ids that cannot be a path segment
    "38_nul_in_user_id.json": _same(422, "user_id: contains a NUL"),
    "39_lone_surrogate_in_content.json": _same(422, "messages.0.content: contains a lone"),
    "40_lone_surrogate_in_user_id.json": _same(422, "user_id: contains a lone surrogate"),
    "41_slash_in_user_id.json": _same(422, "user_id: contains '/'"),
    "42_nul_in_conversation_id.json": _same(422, "conversation_id: contains a NUL"),
    # made at run time (too big to commit)
    "90_ten_megabyte_message.json": Case(413, "10,000,000 characters", "over the limit"),
    "91_message_one_over_the_limit.json": Case(413, "the limit is 100,000", "too long"),
    "92_too_many_messages.json": _same(422, "messages: list should have at most"),
    "93_nested_too_deeply.json": _same(422, "nested"),
}


def generated_files(folder: Path) -> list[Path]:
    def transcript(messages: list[dict[str, str]]) -> str:
        return json.dumps(
            {"conversation_id": "drill-big", "user_id": "drill-u1", "messages": messages}
        )

    big = {
        "90_ten_megabyte_message.json": [{"role": "user", "content": "x" * 10_000_000}],
        "91_message_one_over_the_limit.json": [
            {"role": "user", "content": "y" * (MAX_MESSAGE_CHARS + 1)}
        ],
        "92_too_many_messages.json": [
            {"role": "user", "content": f"message {i}"}
            for i in range(MAX_MESSAGES_PER_TRANSCRIPT + 1)
        ],
    }
    paths = []
    for name, messages in big.items():
        path = folder / name
        path.write_text(transcript(messages))
        paths.append(path)
    deep = folder / "93_nested_too_deeply.json"  # 100,000 levels: past any parser's stack
    deep.write_text("[" * 100_000 + "]" * 100_000)
    return [*paths, deep]


def corpus(folder: Path) -> list[Path]:
    return sorted(CORPUS.iterdir()) + generated_files(folder)


def cli_outcome(path: Path, db_url: str, *, in_process: bool) -> tuple[int, str]:
    """(exit code, stderr) of `memlane enqueue PATH`."""
    env = {"MEMLANE_DATABASE_URL": db_url}
    if in_process:
        from typer.testing import CliRunner

        from memlane.cli.app import app

        result = CliRunner().invoke(app, ["enqueue", str(path)], env=env)
        return result.exit_code, result.stderr
    done = subprocess.run(
        [sys.executable, "-m", "memlane.cli.app", "enqueue", str(path)],
        cwd=ROOT,
        env=env_for_children(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, done.stderr


def api_client(db_url: str) -> Any:
    with warnings.catch_warnings():  # starlette's note about httpx, not ours
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
    from memlane.api.app import create_app
    from memlane.config.settings import load_settings

    return TestClient(create_app(settings=load_settings(database_url=db_url)))


def run(db_url: str, workdir: Path, *, in_process: bool) -> Verdict:
    verdict = Verdict("bad_input")
    truncate(db_url)
    before = table_counts(db_url, TABLES)
    paths = corpus(workdir)
    verdict.check("corpus files", f">= 20 ({len(CASES)} expected)", len(paths), len(paths) >= 20)
    client = api_client(db_url)
    cli_ok = api_ok = 0
    for path in paths:
        case = CASES[path.name]
        code, stderr = cli_outcome(path, db_url, in_process=in_process)
        error_line = next((line for line in stderr.splitlines() if line.startswith("error: ")), "")
        cli_passed = code == 2 and case.cli.lower() in error_line.lower()
        cli_ok += cli_passed
        if not cli_passed:
            verdict.check(
                f"cli {path.name}",
                f"exit 2, '{case.cli}'",
                f"exit {code}: {error_line[:160]}",
                False,
            )
        response = client.post(
            "/v1/transcripts",
            content=path.read_bytes(),
            headers={"content-type": "application/json"},
        )
        message = _error_message(response)
        api_passed = response.status_code == case.http and case.api.lower() in message.lower()
        api_ok += api_passed
        if not api_passed:
            verdict.check(
                f"http {path.name}",
                f"{case.http}, '{case.api}'",
                f"{response.status_code}: {message[:160]}",
                False,
            )
    verdict.check("refused by the CLI (exit 2, clear error)", len(paths), cli_ok)
    verdict.check("refused by the HTTP API (422/413, clear error)", len(paths), api_ok)
    verdict.check("rows written", before, table_counts(db_url, TABLES))
    return verdict


def _error_message(response: Any) -> str:
    try:
        body = response.json()
        return f"{body['error']['code']}: {body['error']['message']}"
    except (ValueError, KeyError, TypeError):
        return f"(not the API's error shape) {response.text[:200]}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--in-process", action="store_true", help="run the CLI with Typer's runner")
    args = p.parse_args(argv)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    db_url = pg_database("memlane_drill")
    with tempfile.TemporaryDirectory() as workdir:
        verdict = run(db_url, Path(workdir), in_process=args.in_process)
    return verdict.finish()


if __name__ == "__main__":
    raise SystemExit(main())
