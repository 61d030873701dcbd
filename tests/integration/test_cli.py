"""The `memlane` command line, in process (Typer's CliRunner) and as real processes:
exit codes, one-line errors, enqueue/assemble/memories/jobs/packs/db/worker, the demo,
and that `assemble` never loads litellm or Celery."""

from __future__ import annotations

import inspect
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from typer.testing import CliRunner, Result

from memlane.cli.app import app, demo
from memlane.models import migrate
from memlane.models.db import unit_of_work
from memlane.models.schemas import MemoryCreate
from memlane.models.store.memories import memories
from memlane.models.tables import Conversation, Job, Message
from memlane.pipeline.dedup.keywords import keywords
from memlane.pipeline.errors import NotFoundError
from tests.conftest import EXAMPLES

MAYA = EXAMPLES / "maya-01-auth-migration.json"
HEAVY = ("litellm", "celery", "kombu", "openai")
# Runs the CLI's main() and then reports which heavy packages the process loaded.
DRIVER = (
    "import sys\n"
    "from memlane.cli.app import main\n"
    "try:\n"
    "    main()\n"
    "finally:\n"
    f"    heavy = sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))\n"
    "    print('heavy modules: ' + (','.join(heavy) or '-'), file=sys.stderr)\n"
)


def cli(url: str, *args: str, input: str | None = None, **env: str) -> Result:
    return CliRunner().invoke(
        app, list(args), input=input, env={"MEMLANE_DATABASE_URL": url, **env}
    )


def process(
    args: list[str], *, cwd: Path, env: dict[str, str] | None = None, driver: bool = False
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
    command = (
        [sys.executable, "-c", DRIVER] if driver else [sys.executable, "-m", "memlane.cli.app"]
    )
    return subprocess.run(
        command + args,
        cwd=cwd,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error: ")]


def count(url: str, table: Any) -> int:
    with unit_of_work(url) as session:
        return int(session.scalar(select(func.count()).select_from(table)) or 0)


def add_memory(url: str, user: str, content: str, *extra: str) -> str:
    result = cli(url, "memories", "add", "--user", user, "--content", content, *extra)
    assert result.exit_code == 0, result.stderr
    return result.stdout.strip()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ----------------------------------------------------------------------------- demo


def test_the_demo_runs_end_to_end_offline(tmp_path: Path) -> None:
    # how long it takes is not checked here (a busy machine took 40 s): speed is for
    # benchmarks, not tests
    users = sorted({json.loads(p.read_text())["user_id"] for p in EXAMPLES.glob("*.json")})
    done = process(["demo"], cwd=tmp_path, driver=True)

    assert done.returncode == 0, done.stderr
    assert (tmp_path / "memlane-demo.db").exists()
    for user in users:
        memories = re.search(rf"{user}: (\d+) memories", done.stdout)
        assert memories is not None and int(memories.group(1)) > 0
        assert f'<memlane_context user="{user}">' in done.stdout
    packs = re.findall(r"pack pack_\w+: (\d+)/(\d+) tokens used", done.stdout)
    assert len(packs) == len(users)
    assert all(int(used) <= int(budget) == 1500 for used, budget in packs)
    assert "heavy modules: -" in done.stderr  # the offline extractor: no litellm, no Celery


def test_the_demo_database_run_from_the_checkout_is_ignored_by_git() -> None:
    # README: `scripts/demo.sh` runs from the repository root, so the demo's SQLite file
    # (and the WAL files beside it while it runs) lands in the checkout.
    default = inspect.signature(demo).parameters["db"].default
    root = EXAMPLES.parents[2]
    for name in (str(default), f"{default}-wal", f"{default}-shm"):
        checked = subprocess.run(
            ["git", "check-ignore", "--no-index", "-q", name], cwd=root, check=False
        )
        assert checked.returncode == 0, f"{name} is not in .gitignore"


def test_the_demo_hint_works_as_printed_without_an_activated_venv(tmp_path: Path) -> None:
    bare = {"PATH": "/usr/bin:/bin", "COLUMNS": "80"}  # .venv/bin not on PATH
    done = process(["demo", "--budget", "600"], cwd=tmp_path, env=bare)
    assert done.returncode == 0, done.stderr

    hint = done.stdout.split("Explore the same store:\n", 1)[1].splitlines()
    assert len(hint) == 3 and all(line.startswith("  ") for line in hint)  # one line each
    assert hint[2].endswith("--json")  # not cut at 80 columns
    shell = subprocess.run(
        ["/bin/bash", "-c", "set -e\n" + "\n".join(hint)],
        cwd=tmp_path,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}, **bare},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shell.returncode == 0, shell.stderr
    assert "memories" in shell.stdout and '"pack_id": "pack_' in shell.stdout


def test_the_demo_starts_from_a_fresh_database_each_run(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    first = CliRunner().invoke(app, ["demo", "--db", str(db), "--budget", "600"])
    second = CliRunner().invoke(app, ["demo", "--db", str(db), "--budget", "600"])

    assert first.exit_code == 0 and second.exit_code == 0, second.stderr
    ingested = [re.search(r"ingested .*: (\d+) messages", r.stdout) for r in (first, second)]
    # On a reused store the second run would find every message already known (0 new).
    assert ingested[0] is not None and ingested[1] is not None
    assert int(ingested[0].group(1)) > 0
    assert ingested[0].group(1) == ingested[1].group(1)


# ----------------------------------------------------------------------------- enqueue


def test_enqueue_runs_the_jobs_and_prints_their_ids(sqlite_url: str) -> None:
    result = cli(sqlite_url, "enqueue", "--final", "--wait", str(MAYA))

    assert result.exit_code == 0, result.stderr
    job_ids = result.stdout.split()
    assert job_ids and all(j.startswith("job_") for j in job_ids)
    with unit_of_work(sqlite_url) as session:
        statuses = session.execute(select(Job.id, Job.status)).all()
    assert sorted(statuses) == sorted((j, "done") for j in job_ids)
    listed = cli(sqlite_url, "memories", "list", "--user", "maya", "--json")
    assert len(json.loads(listed.stdout)) > 0


def test_enqueue_reads_jsonl_from_stdin(sqlite_url: str) -> None:
    lines = "\n".join(
        json.dumps(
            {
                "conversation_id": cid,
                "user_id": "u1",
                "messages": [
                    {"role": "user", "content": "I prefer Postgres for every new service."},
                    {"role": "assistant", "content": "Postgres it is."},
                ],
            }
        )
        for cid in ("c1", "c2")
    )
    result = cli(sqlite_url, "enqueue", "-", input=lines)

    assert result.exit_code == 0, result.stderr
    assert count(sqlite_url, Conversation) == 2
    assert count(sqlite_url, Message) == 4


def test_enqueue_that_makes_no_job_says_why(sqlite_url: str, tmp_path: Path) -> None:
    turns = [
        {"role": role, "content": f"I prefer Postgres, turn {i}."}
        for i in range(3)
        for role in ("user", "assistant")
    ]
    body = {"conversation_id": "c1", "user_id": "u1", "messages": turns}
    (tmp_path / "short.json").write_text(json.dumps(body))
    short = cli(sqlite_url, "enqueue", str(tmp_path / "short.json"))

    assert short.exit_code == 0, short.stderr
    assert short.stdout == ""  # no job id
    assert "0 job(s)" in short.stderr
    assert (
        "no job for c1: no extraction due yet: the conversation has 3 assistant message(s) "
        "and one is due every 5 (the next after 2 more)" in " ".join(short.stderr.split())
    )
    final = cli(sqlite_url, "enqueue", "--final", str(tmp_path / "short.json"))
    assert final.stdout.startswith("job_") and "no job" not in final.stderr
    again = cli(sqlite_url, "enqueue", "--final", str(tmp_path / "short.json"))
    assert "no job for c1: every message is already covered" in " ".join(again.stderr.split())


@pytest.mark.parametrize(
    ("name", "text", "where", "problem"),
    [
        ("broken.json", '{"conversation_id": "c1", "user_id": "u1",', "broken.json",
         "invalid JSON at line 1 column 43: Expecting property name enclosed in double quotes"),
        ("no-user.json", json.dumps({"conversation_id": "c1",
                                     "messages": [{"role": "user", "content": "hi"}]}),
         "no-user.json", "invalid transcript: user_id: Field required"),
        ("lines.jsonl", MAYA.read_text().replace("\n", " ") + "\n{]\n", "lines.jsonl line 2",
         "invalid JSON at column 2: Expecting property name enclosed in double quotes"),
    ],
)  # fmt: skip
def test_a_bad_input_exits_2_names_it_and_enqueues_nothing(
    sqlite_url: str, tmp_path: Path, name: str, text: str, where: str, problem: str
) -> None:
    bad = tmp_path / name
    bad.write_text(text, encoding="utf-8")

    # a good file first: nothing of it may be written either
    result = cli(sqlite_url, "enqueue", "--wait", str(MAYA), str(bad))

    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"error: {bad.parent / where}: {problem}"]
    assert result.stdout == ""
    assert count(sqlite_url, Message) == 0
    assert count(sqlite_url, Job) == 0


def test_a_failed_job_exits_1_naming_it_and_can_be_retried(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    unreachable = {
        "MEMLANE_DATABASE_URL": url,
        "MEMLANE_LLM_MODEL": "openai/x",
        "MEMLANE_LLM_API_BASE": f"http://127.0.0.1:{closed_port()}/v1",
        "MEMLANE_LLM_API_KEY": "x",
        "MEMLANE_LLM_MAX_RETRIES": "0",
    }
    failed = process(["enqueue", "--final", "--wait", str(MAYA)], cwd=tmp_path, env=unreachable)

    assert failed.returncode == 1, failed.stderr
    job_ids = failed.stdout.split()
    assert job_ids
    errors = error_lines(failed.stderr)
    assert len(errors) == len(job_ids)
    for job_id, line in zip(sorted(job_ids), sorted(errors), strict=True):
        assert line.startswith(
            f"error: job {job_id} failed: TransientProviderError: could not reach openai/x"
        )

    listed = cli(url, "jobs", "list", "--status", "failed", "--json")
    assert sorted(j["id"] for j in json.loads(listed.stdout)) == sorted(job_ids)
    table = cli(url, "jobs", "list", "--status", "failed", COLUMNS="80").stdout
    assert max(len(line) for line in table.splitlines()) <= 80
    rows = [line.split() for line in table.splitlines() if line.strip().startswith("job_")]
    # one line per job: the id and status whole, the error cut short on the same line
    assert sorted(row[0] for row in rows) == sorted(job_ids)
    assert all(row[1:3] == ["maya", "failed"] and row[-1].endswith("…") for row in rows), table
    assert all(row[6].startswith("TransientProvider") for row in rows), table

    # the offline extractor (no MEMLANE_LLM_MODEL) takes the retried job through
    retried = cli(url, "jobs", "retry", job_ids[0])
    assert retried.exit_code == 0, retried.stderr
    assert retried.stdout.startswith(f"{job_ids[0]}: queued again at stage extract")
    shown = json.loads(cli(url, "jobs", "show", job_ids[0], "--json").stdout)
    assert (shown["status"], shown["model"]) == ("done", "offline")

    again = cli(url, "jobs", "retry", job_ids[0])
    assert again.exit_code == 1
    assert again.stderr.startswith(
        f"error: job {job_ids[0]} is done; only a failed job can be retried, or a queued one "
    )


# ----------------------------------------------------------------------------- assemble


def test_assemble_prints_xml_or_json_within_the_budget(db_url: str) -> None:
    add_memory(
        db_url, "u1", "Prefers Postgres & <pgvector> for every new service.", "--importance", "0.9"
    )
    add_memory(db_url, "u1", "Deploys on Fly.io.", "--category", "project")
    add_memory(db_url, "u2", "Someone else's secret plan.")

    xml = cli(db_url, "assemble", "--user", "u1", "--query", "which database?", "--budget", "400")
    assert xml.exit_code == 0, xml.stderr
    assert xml.stdout.startswith('<memlane_context user="u1">\n')
    assert xml.stdout.endswith("</memlane_context>\n")
    assert "Prefers Postgres &amp; &lt;pgvector&gt; for every new service." in xml.stdout
    assert "Deploys on Fly.io." in xml.stdout
    assert "secret plan" not in xml.stdout
    assert re.fullmatch(r"pack pack_\w+: \d+/400 tokens, 0 dropped, retrieval .+\n", xml.stderr)

    as_json = cli(db_url, "assemble", "--user", "u1", "--json", "--context-window", "128000")
    assert as_json.exit_code == 0, as_json.stderr
    body = json.loads(as_json.stdout)
    assert set(body) == {"context", "json", "pack"}
    assert body["pack"]["budget_tokens"] == 108_900  # (128,000 − 2,000 − 1,000 − 4,000) × 0.9
    assert 0 < body["pack"]["used_tokens"] <= 108_900
    assert [m["content"] for m in body["json"]["memories"]] == [
        "Prefers Postgres & <pgvector> for every new service.",
        "Deploys on Fly.io.",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--user", "u1", "--budget", "10", "--context-window", "9000"],
         "error: give --budget or --context-window, not both"),
        (["--user", "u1", "--now", "yesterday"], "error: --now: not an ISO 8601 time: 'yesterday'"),
        (["--query", "x"], "error: --user is required (or --batch FILE)"),
        (["--user", "u1", "--out", "x.jsonl"], "error: --out goes with --batch"),
    ],
)  # fmt: skip
def test_assemble_refuses_bad_options_with_exit_2(
    sqlite_url: str, args: list[str], message: str
) -> None:
    result = cli(sqlite_url, "assemble", *args)
    assert result.exit_code == 2
    assert result.stderr == message + "\n"


def test_assemble_refuses_an_unknown_strategy_as_a_usage_error(sqlite_url: str) -> None:
    result = cli(sqlite_url, "assemble", "--user", "u1", "--strategy", "loudest")
    assert result.exit_code == 2
    assert "loudest" in result.stderr


def test_pinned_memories_over_the_budget_exit_1(sqlite_url: str) -> None:
    add_memory(sqlite_url, "u1", "word " * 200, "--tier", "pinned")

    result = cli(sqlite_url, "assemble", "--user", "u1", "--budget", "50")

    assert result.exit_code == 1
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("error: ") and "budget is 50 (over by" in result.stderr


def test_batch_writes_one_json_line_per_query_and_exits_1_if_one_failed(
    sqlite_url: str, tmp_path: Path
) -> None:
    add_memory(sqlite_url, "u1", "Prefers Postgres for every new service.")
    add_memory(sqlite_url, "u2", "word " * 200, "--tier", "pinned")
    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        '{"user_id": "u1", "query": "database?", "budget": 300}\n'
        "\n"
        '{"user_id": "u2", "budget": 50}\n'
        '{"user_id": "u1", "strategy": "recent"}\n',
        encoding="utf-8",
    )
    out = tmp_path / "results.jsonl"

    result = cli(
        sqlite_url, "assemble", "--batch", str(queries), "--out", str(out), "--budget", "700"
    )

    assert result.exit_code == 1
    assert error_lines(result.stderr) == ["error: 1 of 3 queries failed (see their error objects)"]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["line"] for row in rows] == [1, 3, 4]
    assert rows[0]["pack"]["budget_tokens"] == 300
    assert rows[1]["error"]["code"] == "budget_exceeded" and "context" not in rows[1]
    assert rows[2]["pack"]["budget_tokens"] == 700  # the command line's budget as default
    assert rows[2]["pack"]["strategy"] == "recent"
    assert "Prefers Postgres" in rows[2]["context"]


def test_batch_lines_carry_their_ids_back_and_may_ask_for_the_compact_style(
    sqlite_url: str, tmp_path: Path
) -> None:
    add_memory(sqlite_url, "u1", "Prefers Postgres for every new service.")
    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        '{"question_id": "conv-1-q7", "user_id": "u1", "query": "database?", "budget": 300}\n'
        '{"id": 42, "user_id": "u1", "query": "database?", "style": "compact"}\n',
        encoding="utf-8",
    )
    out = tmp_path / "results.jsonl"

    result = cli(sqlite_url, "assemble", "--batch", str(queries), "--out", str(out))

    assert result.exit_code == 0, result.stderr
    first, second = [json.loads(line) for line in out.read_text().splitlines()]
    assert (first["question_id"], "id" in first) == ("conv-1-q7", False)
    assert (second["id"], "question_id" in second) == (42, False)
    assert 'importance="' in first["context"]
    assert '<m id="1">Prefers Postgres' in second["context"]
    assert second["pack"]["style"] == "compact"
    single = cli(sqlite_url, "assemble", "--user", "u1", "--query", "db", "--style", "compact")
    assert '<m id="1">Prefers Postgres for every new service.</m>' in single.stdout


def test_a_bad_batch_line_exits_2_before_anything_is_written(
    sqlite_url: str, tmp_path: Path
) -> None:
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"user_id": "u1"}\n{"user_id": "u1", "budget": 0}\n', encoding="utf-8")
    out = tmp_path / "results.jsonl"

    result = cli(sqlite_url, "assemble", "--batch", str(queries), "--out", str(out))

    assert result.exit_code == 2
    assert result.stderr == (
        f"error: {queries} line 2: budget: Input should be greater than or equal to 1\n"
    )
    assert not out.exists()


def test_assemble_loads_neither_litellm_nor_celery(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fast.db'}"
    add_memory(url, "u1", "Prefers Postgres for every new service.")

    done = process(
        ["assemble", "--user", "u1", "--query", "which database?"],
        cwd=tmp_path,
        env={"MEMLANE_DATABASE_URL": url},
        driver=True,
    )

    assert done.returncode == 0, done.stderr
    assert "Prefers Postgres" in done.stdout
    assert done.stderr.splitlines()[-1] == "heavy modules: -"


# ----------------------------------------------------------------------------- memories, packs


def test_memories_add_pin_list_show_and_forget(db_url: str) -> None:
    memory_id = add_memory(db_url, "u1", "Prefers TypeScript.", "--category", "preference")
    assert memory_id.startswith("mem_")

    pinned = cli(db_url, "memories", "pin", "--user", "u1", memory_id)
    assert pinned.stdout == f"{memory_id}: tier pinned, status active\n"
    listed = json.loads(cli(db_url, "memories", "list", "--user", "u1", "--json").stdout)
    assert [(m["id"], m["tier"], m["category"]) for m in listed] == [
        (memory_id, "pinned", "preference")
    ]
    table = cli(db_url, "memories", "list", "--user", "u1", COLUMNS="200")
    assert "Prefers TypeScript." in table.stdout and "pinned" in table.stdout
    shown = json.loads(cli(db_url, "memories", "show", "--user", "u1", memory_id, "--json").stdout)
    assert shown["content"] == "Prefers TypeScript."

    # another user's id is not found (exit 1), never shown
    other = cli(db_url, "memories", "show", "--user", "u2", memory_id)
    assert other.exit_code == 1
    assert other.stderr == f"error: user 'u2' has no memory '{memory_id}'\n"

    forgotten = cli(db_url, "memories", "forget", "--user", "u1", memory_id)
    assert forgotten.stdout == f"{memory_id}: tier pinned, status deleted\n"
    assert json.loads(cli(db_url, "memories", "list", "--user", "u1", "--json").stdout) == []
    everything = cli(db_url, "memories", "list", "--user", "u1", "--status", "all", "--json")
    assert [m["status"] for m in json.loads(everything.stdout)] == ["deleted"]


def test_verify_and_quarantine_decide_what_reaches_the_context(sqlite_url: str) -> None:
    kept = add_memory(sqlite_url, "u1", "Prefers Postgres for every new service.")
    hidden = add_memory(sqlite_url, "u1", "Keeps a private journal in Obsidian.")

    verified = cli(sqlite_url, "memories", "verify", "--user", "u1", kept)
    quarantined = cli(sqlite_url, "memories", "quarantine", "--user", "u1", hidden)
    xml = cli(sqlite_url, "assemble", "--user", "u1").stdout

    assert verified.stdout == f"{kept}: tier verified, status active\n"
    assert quarantined.stdout == f"{hidden}: tier candidate, status quarantined\n"
    assert "Prefers Postgres" in xml
    assert "Obsidian" not in xml
    # the context shows the short id, which the CLI takes in place of the full one
    shown = cli(sqlite_url, "memories", "show", "--user", "u1", "--json", "1")
    assert json.loads(shown.stdout)["id"] == kept and '<m id="1"' in xml


def test_a_memory_out_of_range_exits_2_naming_the_field(sqlite_url: str) -> None:
    result = cli(
        sqlite_url, "memories", "add", "--user", "u1", "--content", "x", "--importance", "3"
    )
    assert result.exit_code == 2
    assert result.stderr == "error: importance: Input should be less than or equal to 1\n"


def test_packs_show_returns_the_pack_an_assembly_logged(db_url: str) -> None:
    add_memory(db_url, "u1", "Prefers Postgres for every new service.")
    assembled = json.loads(cli(db_url, "assemble", "--user", "u1", "--json").stdout)
    pack_id = assembled["pack"]["pack_id"]

    shown = cli(db_url, "packs", "show", pack_id, "--json")

    assert shown.exit_code == 0, shown.stderr
    raw = json.loads(shown.stdout)
    texts = [item.pop("text") for item in raw["items"]]
    assert raw == assembled["pack"]  # the pack as logged, each item with its text
    assert texts == ["Prefers Postgres for every new service."]
    missing = cli(db_url, "packs", "show", "pack_nope")
    assert missing.exit_code == 1
    assert missing.stderr.startswith("error: no context pack 'pack_nope'")


def test_packs_show_renders_a_table_at_80_columns(sqlite_url: str) -> None:
    long = "Prefers long walks along the river before work, every single day of the week."
    add_memory(sqlite_url, "u1", long, "--importance", "0.9")
    add_memory(sqlite_url, "u1", "Likes tea.", "--importance", "0.2")
    done = cli(sqlite_url, "assemble", "--user", "u1", "--budget", "60", "--json")
    pack = json.loads(done.stdout)["pack"]
    table = cli(sqlite_url, "packs", "show", pack["pack_id"], COLUMNS="80").stdout

    lines = table.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert pack["pack_id"] in table and "item" in lines[2] and "in/out" in lines[2]
    rows = {line.split()[0]: line.split() for line in lines if line[:4].strip().isdigit()}
    by_ref = {str(item["ref"]): item for item in pack["items"]}
    assert set(rows) == set(by_ref)  # every item, by the short id the context shows
    for ref, row in rows.items():
        item = by_ref[ref]
        assert row[1:5] == ["memory", item["tier"], f"{item['score']:.3f}", str(item["tokens"])]
        short = {"over_memory_share": "share", "over_budget": "budget"}
        out = ["out:", short.get(item["drop_reason"], "?")]
        assert row[5:7] == (["in", *row[6:7]] if item["included"] else out), table
    assert not all(item["included"] for item in pack["items"])  # a drop shown
    flat = " ".join(table.split())
    assert "Likes tea." in flat and "every single day of the week." in flat


def test_debug_lets_the_exception_through(sqlite_url: str) -> None:
    quiet = cli(sqlite_url, "memories", "show", "--user", "u1", "mem_nope")
    loud = cli(sqlite_url, "--debug", "memories", "show", "--user", "u1", "mem_nope")

    assert quiet.exit_code == 1 and isinstance(quiet.exception, SystemExit)
    assert isinstance(loud.exception, NotFoundError)


def test_settings_and_database_errors_are_one_line(tmp_path: Path) -> None:
    bad_setting = cli("mysql://x", "memories", "list", "--user", "u1")
    assert bad_setting.exit_code == 2
    assert bad_setting.stderr.startswith("error: invalid settings: MEMLANE_DATABASE_URL: ")
    assert len(bad_setting.stderr.splitlines()) == 1

    down = cli(f"postgresql://memlane@127.0.0.1:{closed_port()}/x", "jobs", "list")
    assert down.exit_code == 1
    assert down.stderr.startswith("error: cannot reach the database of MEMLANE_DATABASE_URL")
    assert "Connection refused" in down.stderr
    assert len(down.stderr.splitlines()) == 1


# ----------------------------------------------------------------------------- operations


def test_db_upgrade_migrates_and_prints_the_revision(tmp_path: Path, pg: str) -> None:
    head = migrate.head_revision()
    url = f"sqlite:///{tmp_path / 'new.db'}"

    first = cli(url, "db", "upgrade")
    second = cli(url, "db", "upgrade")
    on_pg = cli(pg, "db", "upgrade")

    assert first.stdout == f"{url}: upgraded from empty to revision {head}\n"
    assert second.stdout == f"{url}: already at revision {head}\n"
    assert on_pg.exit_code == 0
    assert on_pg.stdout.splitlines()[0].endswith(f": already at revision {head}")
    # the default embedder (minilm) gets HNSW indexes on PostgreSQL: none needed here
    assert on_pg.stdout.endswith("vector indexes: 0 ready\n")
    assert migrate.is_up_to_date(url)


def test_db_upgrade_builds_the_hnsw_indexes_of_large_users(pg: str, now: datetime) -> None:
    from memlane.models.db import get_engine
    from memlane.models.store.memories import vector_index
    from memlane.workers.embedders import HashingEmbedder

    engine = get_engine(pg)
    embedder = HashingEmbedder(64)
    with unit_of_work(pg) as s:
        for user, n in (("big", 3), ("small", 1)):
            for i in range(n):
                content = f"User note {i}"
                memories.add(
                    s,
                    user_id=user,
                    memory=MemoryCreate(content=content),
                    keywords=keywords(content),
                    embedding=embedder.embed([content])[0],
                    embedding_model=embedder.name,
                    now=now,
                )
    env = {
        "MEMLANE_EMBEDDING_MODEL": "hashing",
        "MEMLANE_EMBEDDING_DIM": "64",
        "MEMLANE_HNSW_MIN_MEMORIES": "2",
    }
    auto = cli(pg, "db", "upgrade", **env)  # auto: not for hashing
    assert auto.exit_code == 0 and "HNSW" not in auto.stdout
    assert vector_index.hnsw_indexes(engine) == []

    forced = cli(pg, "db", "upgrade", MEMLANE_VECTOR_INDEX="hnsw", **env)
    assert forced.exit_code == 0, forced.output
    assert "1 user(s) with at least 2 memories" in forced.stdout
    assert forced.stdout.endswith("vector indexes: 1 ready\n")
    assert vector_index.hnsw_indexes(engine) == [vector_index.index_name("big", embedder.name, 64)]


def test_worker_builds_the_celery_command_and_needs_a_broker(sqlite_url: str) -> None:
    dry = cli(sqlite_url, "worker", "--queues", "extract", "--dry-run")
    assert dry.exit_code == 0
    assert dry.stdout.endswith(
        "-m celery -A memlane.workers.app worker -Q extract -E -P threads -l INFO "
        "-n memlane-extract@%h -c 32\n"
    )

    no_broker = cli(sqlite_url, "worker")
    assert no_broker.exit_code == 2
    assert no_broker.stderr.startswith("error: MEMLANE_BROKER_URL is not set")

    unknown = cli(sqlite_url, "worker", "--queues", "fast", "--dry-run")
    assert unknown.exit_code == 2


def test_serve_runs_the_http_api(tmp_path: Path) -> None:
    port = closed_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")},
        "MEMLANE_DATABASE_URL": f"sqlite:///{tmp_path / 'api.db'}",
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "memlane.cli.app", "serve", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
                    assert r.status == 200
                    break
            except OSError:
                assert server.poll() is None, "memlane serve exited"
                assert time.monotonic() < deadline, "memlane serve did not answer in 30 s"
                time.sleep(0.2)
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_the_console_script_is_installed(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "memlane"
    done = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)

    assert done.returncode == 0
    for command in ("demo", "enqueue", "assemble", "memories", "jobs", "packs", "db", "worker"):
        assert command in done.stdout


def test_version_and_debug_anywhere_on_the_line(sqlite_url: str) -> None:
    from importlib.metadata import version

    shown = CliRunner().invoke(app, ["--version"])
    assert shown.exit_code == 0 and shown.output.strip() == f"memlane {version('memlane')}"
    quiet = cli(sqlite_url, "memories", "show", "--user", "u1", "mem_missing")
    assert quiet.exit_code == 1 and quiet.output.startswith("error: ")
    loud = cli(sqlite_url, "memories", "show", "--user", "u1", "mem_missing", "--debug")
    assert type(loud.exception).__name__ == "NotFoundError"  # raised, with its traceback


def test_a_missing_database_says_how_to_create_it(pg_url: str) -> None:
    missing = pg_url.rsplit("/", 1)[0] + "/memlane_no_such_database"
    result = cli(missing, "memories", "list", "--user", "u1")
    assert result.exit_code == 1
    assert "createdb memlane_no_such_database" in result.output
    assert "memlane db upgrade" in result.output and "OperationalError" not in result.output


def test_the_memories_table_reads_well_at_80_columns(sqlite_url: str) -> None:
    long = "Prefers long walks along the river before work, " * 3
    lane_ids = [add_memory(sqlite_url, "u1", text) for text in (long.strip(), "Likes tea.")]
    cli(sqlite_url, "memories", "forget", "--user", "u1", lane_ids[1])
    table = cli(sqlite_url, "memories", "list", "--user", "u1", "--status", "all", COLUMNS="80")
    lines = table.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "u1: 2 memories, of every status" in table.stdout
    rows = [line.split() for line in lines if line.strip()[:1].isdigit()]
    assert sorted(row[0] for row in rows) == ["1", "2"]  # short ids, whole, one per memory
    assert {row[3] for row in rows} == {"active", "deleted"}
    assert " ".join(table.stdout.split()).count("Prefers long walks along the river") == 3
