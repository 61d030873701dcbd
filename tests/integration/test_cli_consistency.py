"""The CLI's shared conventions, checked command by command: `--json` prints one JSON
document (and nothing else) on stdout wherever a command prints data, `-q` is `--query`
wherever a query is, a reader that closes the pipe early ends the command quietly, a bulk
enqueue shows its progress bar from the first file read, and the piped demo prints each
context exactly as the assembler made it."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from sqlalchemy import update
from typer.testing import CliRunner, Result

from memlane.cli.app import app
from memlane.cli.common import MemlaneGroup
from memlane.config.settings import load_settings
from memlane.models import migrate
from memlane.models.db import unit_of_work
from memlane.models.tables import Job
from memlane.service.facade import Memlane
from tests.conftest import EXAMPLES

MAYA = EXAMPLES / "maya-01-auth-migration.json"
# The demo forces the hashing embedder; every other command here uses it too, whatever
# the default, so the demo's store can be read and assembled again.
HASHING = {"MEMLANE_EMBEDDING_MODEL": "hashing"}
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
ROOT = Path(__file__).resolve().parents[2]


def cli(url: str, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(
        app, list(args), input=input, env={"MEMLANE_DATABASE_URL": url, **HASHING}
    )


def data(url: str, *args: str) -> Any:
    """The one JSON document a --json command printed (json.loads fails on anything more)."""
    result = cli(url, *args, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMLANE_", "TTY_"))}
    # this checkout's memlane, whichever one the virtualenv installed
    path = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return {**env, **HASHING, "PYTHONPATH": path, **extra}


def memlane(*args: str) -> str:
    return shlex.join([sys.executable, "-m", "memlane.cli.app", *args])


def piped_into_head(command: str, tmp_path: Path, **env: str) -> tuple[str, int, str]:
    """`command | head -1` in a shell: (what head printed, the command's exit status, its
    stderr)."""
    errors = tmp_path / "stderr.txt"
    shell = f'{command} 2>{shlex.quote(str(errors))} | head -1; echo "exit ${{PIPESTATUS[0]}}"'
    done = subprocess.run(
        ["/bin/bash", "-c", shell],
        cwd=tmp_path,
        env=clean_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    first, status = done.stdout.rsplit("exit ", 1)
    return first, int(status), errors.read_text()


# ----------------------------------------------------------------------------- --json


def test_enqueue_json_gives_each_transcripts_result_and_the_jobs_statuses(
    sqlite_url: str,
) -> None:
    body = data(sqlite_url, "enqueue", "--final", str(MAYA))

    assert body["transcripts"] == 1
    assert body["stored_messages"] == len(json.loads(MAYA.read_text())["messages"]) > 0
    assert body["skipped_messages"] == 0
    (result,) = body["results"]
    assert result["source"] == str(MAYA)
    assert result["conversation_id"] == json.loads(MAYA.read_text())["conversation_id"]
    assert result["job_ids"] == body["job_ids"] and body["job_ids"]
    # no broker: this process ran the jobs, and says how they ended
    assert body["jobs"] == {job_id: "done" for job_id in body["job_ids"]}

    again = data(sqlite_url, "enqueue", "--final", str(MAYA))
    assert again["job_ids"] == [] and again["jobs"] == {}
    assert again["results"][0]["no_job_reason"].startswith("every message is already covered")


def test_memories_commands_print_json_on_both_backends(db_url: str) -> None:
    added = data(db_url, "memories", "add", "--user", "u1", "--content", "Prefers Postgres.")
    assert added["created"] is True and added["memory"]["content"] == "Prefers Postgres."
    memory_id = added["memory"]["id"]
    again = data(db_url, "memories", "add", "--user", "u1", "--content", "Prefers Postgres.")
    assert (again["created"], again["memory"]["id"]) == (False, memory_id)  # confirmed

    for verb, field, value in (
        ("pin", "tier", "pinned"),
        ("verify", "tier", "verified"),
        ("quarantine", "status", "quarantined"),
        ("forget", "status", "deleted"),
    ):
        changed = data(db_url, "memories", verb, "--user", "u1", memory_id)
        assert (changed["id"], changed[field]) == (memory_id, value), verb
    purged = data(db_url, "memories", "purge", "--user", "u1", memory_id, "--yes")
    assert purged == {"purged": memory_id}
    lifted = data(db_url, "memories", "lift-fingerprints", "--user", "u1", "--yes")
    assert lifted == {"lifted": 1}


def test_soul_procedures_and_users_commands_print_json(sqlite_url: str, tmp_path: Path) -> None:
    block = data(sqlite_url, "soul", "set", "--user", "u1", "style", "--content", "Be brief.")
    assert (block["kind"], block["content"]) == ("style", "Be brief.")
    assert data(sqlite_url, "soul", "delete", "--user", "u1", "style") == {
        "user_id": "u1",
        "deleted": "style",
    }
    procedure = data(
        sqlite_url, "procedures", "add", "--user", "u1", "--name", "deploy", "--content", "Ship."
    )
    assert procedure["name"] == "deploy"
    deleted = data(sqlite_url, "procedures", "delete", "--user", "u1", "deploy")
    assert deleted == {"user_id": "u1", "deleted": procedure["id"]}

    cli(sqlite_url, "memories", "add", "--user", "u1", "--content", "Lives in Porto.")
    export = tmp_path / "u1.jsonl"
    export.write_text(cli(sqlite_url, "users", "export", "--user", "u1").stdout)
    other = f"sqlite:///{tmp_path / 'other.db'}"
    migrate.upgrade(other)
    imported = data(other, "users", "import", str(export))
    assert imported["imported"]["memories"] == 1

    data(sqlite_url, "enqueue", "--final", str(MAYA))
    conversation = json.loads(MAYA.read_text())["conversation_id"]
    gone = data(sqlite_url, "users", "delete-conversation", "--user", "maya", conversation, "--yes")
    assert gone["conversation_id"] == conversation and gone["deleted"]["messages"] > 0
    erased = data(sqlite_url, "users", "erase", "--user", "u1", "--yes")
    assert erased["user_id"] == "u1" and erased["deleted"]["memories"] == 1


def test_jobs_sweep_and_reembed_print_json(sqlite_url: str) -> None:
    (job_id, *_) = data(sqlite_url, "enqueue", "--final", str(MAYA))["job_ids"]
    with unit_of_work(sqlite_url) as session:  # as an extraction that failed leaves it
        session.execute(
            update(Job).where(Job.id == job_id).values(status="failed", last_error="boom")
        )

    retried = data(sqlite_url, "jobs", "retry", job_id)
    assert (retried["id"], retried["status"]) == (job_id, "done")  # after the wait

    swept = data(sqlite_url, "sweep")
    assert swept["extract"] == swept["store"] == [] and swept["tails"] == 0

    moved = data(sqlite_url, "reembed", "--to", "hashing", "--dim", "64")
    assert moved["model"].startswith("hashing") and moved["dim"] == 64
    assert moved["user_ids"] == moved["done"] == ["maya"] and moved["missing"] == []


def test_db_upgrade_and_revision_print_json(tmp_path: Path, pg: str) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    head = migrate.head_revision()

    fresh = cli(url, "db", "upgrade", "--json")
    assert fresh.exit_code == 0, fresh.stderr
    assert json.loads(fresh.stdout) == {
        "database": url,
        "from_revision": None,
        "revision": head,
        "vector_indexes": None,
    }
    assert f"upgraded from empty to revision {head}" in fresh.stderr  # the steps, aside
    on_pg = data(pg, "db", "upgrade")
    assert (on_pg["from_revision"], on_pg["revision"]) == (head, head)

    migrations = tmp_path / "migrations"  # a copy: the package's folder stays as it is
    shutil.copytree(migrate.MIGRATIONS, migrations)
    written = data(url, "db", "revision", "-m", "Add a column", "--migrations", str(migrations))
    assert Path(written["path"]) == migrations / "versions" / f"{int(head) + 1:04d}_add_a_column.py"
    assert Path(written["path"]).exists()


def test_assemble_takes_json_and_q_and_still_reads_the_old_format_option(
    sqlite_url: str,
) -> None:
    cli(sqlite_url, "memories", "add", "--user", "u1", "--content", "Prefers Postgres.")

    body = data(sqlite_url, "assemble", "--user", "u1", "-q", "which database?")
    assert set(body) == {"context", "json", "pack"}
    assert "Prefers Postgres." in body["context"]
    asked = ("assemble", "--user", "u1", "--budget", "99")
    short = cli(sqlite_url, *asked, "-q", "which database?")
    long = cli(sqlite_url, *asked, "--query", "which database?")
    assert short.exit_code == 0 and short.stdout == long.stdout
    assert short.stdout.startswith('<memlane_context user="u1">')

    old = cli(sqlite_url, "assemble", "--user", "u1", "--format", "json")
    assert old.exit_code == 0, old.stderr
    assert set(json.loads(old.stdout)) == {"context", "json", "pack"}
    assert old.stderr.startswith("note: --format is deprecated: give --json")


def test_search_takes_q(sqlite_url: str) -> None:
    cli(sqlite_url, "memories", "add", "--user", "u1", "--content", "Prefers Postgres.")
    cli(sqlite_url, "memories", "add", "--user", "u1", "--content", "Walks the dog at noon.")
    hits = data(sqlite_url, "search", "--user", "u1", "-q", "Postgres")
    assert hits[0]["memory"]["content"] == "Prefers Postgres."


# ----------------------------------------------------------------------------- closed pipes


@pytest.fixture
def big_store(tmp_path: Path) -> str:
    """A user whose memories fill more than a pipe's buffer (64 KiB), in JSON and as a
    table: `| head -1` closes the pipe while the command still writes."""
    url = f"sqlite:///{tmp_path / 'big.db'}"
    migrate.upgrade(url)
    with Memlane(load_settings(database_url=url, embedding_model="hashing")) as lane:
        for n in range(160):
            words = " ".join(f"topic{n}x{k}" for k in range(40))
            lane.add_or_confirm("u1", {"content": f"Memory {n} is about {words}."})
    return url


@pytest.mark.parametrize(
    ("args", "cut"),
    [
        (("users", "export", "--user", "u1"), True),  # a write per line
        (("memories", "list", "--user", "u1", "--limit", "1000", "--json"), False),
        (("memories", "list", "--user", "u1", "--limit", "1000"), False),  # a rich table
    ],
)
def test_a_data_command_whose_reader_leaves_exits_quietly(
    big_store: str, tmp_path: Path, args: tuple[str, ...], cut: bool
) -> None:
    first, status, errors = piped_into_head(
        memlane(*args), tmp_path, MEMLANE_DATABASE_URL=big_store, COLUMNS="80"
    )

    assert first.strip()  # head got its line
    assert errors == ""  # no `error: BrokenPipeError`, no traceback
    # A write after head left fails: 141, as a shell reports a writer whose reader left.
    # Output written in one go (a JSON document, a table) may all be taken by the
    # kernel before head leaves: then nothing failed and the command exits 0.
    assert status == 141 if cut else status in (0, 141)


@pytest.mark.parametrize("args", [("--help",), ("memories", "--help")])
def test_help_whose_reader_leaves_exits_quietly(tmp_path: Path, args: tuple[str, ...]) -> None:
    first, status, errors = piped_into_head(memlane(*args), tmp_path, COLUMNS="80")

    assert first.strip() == "" or "Usage" in first  # rich's first line is blank
    assert errors == ""
    assert status in (0, 141)  # 0 when the help fitted in the pipe before head left


def test_a_broken_pipe_that_is_not_stdout_is_still_an_error() -> None:
    # Only a closed stdout (or stderr) is a reader leaving; a socket's broken pipe (the
    # database's, the broker's) stays an error with its line and exit 1.
    broken = typer.Typer(cls=MemlaneGroup)

    @broken.command()
    def talk() -> None:
        raise BrokenPipeError(32, "Broken pipe")

    @broken.command()
    def other() -> None:
        pass

    result = CliRunner().invoke(broken, ["talk"])
    assert result.exit_code == 1
    assert result.stderr == "error: BrokenPipeError: [Errno 32] Broken pipe (run with --debug)\n"


# ----------------------------------------------------------------------------- progress


def test_a_bulk_enqueue_shows_its_bar_from_the_first_file_read(
    sqlite_url: str, tmp_path: Path
) -> None:
    folder = tmp_path / "transcripts"
    folder.mkdir()
    turns = [
        {"role": role, "content": f"I prefer Postgres, turn {i}."}
        for i in range(2)
        for role in ("user", "assistant")
    ]
    for f in range(12):  # short conversations: no job due, so nothing to wait for
        lines = (
            json.dumps({"conversation_id": f"c{f}-{n}", "user_id": "u1", "messages": turns})
            for n in range(20)
        )
        (folder / f"part-{f:02d}.jsonl").write_text("\n".join(lines) + "\n")

    done = subprocess.run(
        [sys.executable, "-m", "memlane.cli.app", "enqueue", str(folder)],
        env=clean_env(MEMLANE_DATABASE_URL=sqlite_url, TTY_COMPATIBLE="1", COLUMNS="100"),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # no job ids, and no bar on stdout
    screen = ANSI.sub("", done.stderr)  # rich draws on stderr as on a terminal
    summary = screen.index("enqueued 240 transcript(s)")
    # The bar is drawn before the first file is read, then counts the transcripts stored;
    # before, nothing showed until the summary line.
    assert screen.index("reading") < screen.index("storing") < summary
    assert re.search(r"12/12\s+files", screen) and "240/240 transcripts" in screen


def test_a_bad_file_in_a_bulk_enqueue_leaves_one_error_line(
    sqlite_url: str, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{", encoding="utf-8")
    result = cli(sqlite_url, "enqueue", str(MAYA), str(bad))

    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"error: {bad}: invalid JSON at line 1 column 2: "
        "Expecting property name enclosed in double quotes"
    ]  # no bar left above it


# ----------------------------------------------------------------------------- the demo


def test_the_piped_demo_prints_each_context_as_the_assembler_made_it(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    query = "What does the user eat and drink?"
    done = subprocess.run(
        [sys.executable, "-m", "memlane.cli.app", "demo", "--db", str(db), "-q", query],
        cwd=tmp_path,
        env=clean_env(COLUMNS="80"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr

    blocks = re.findall(
        r'^<memlane_context user="([^"]+)">\n.*?^</memlane_context>\n',
        done.stdout,
        flags=re.DOTALL | re.MULTILINE,
    )
    users = sorted({json.loads(p.read_text())["user_id"] for p in EXAMPLES.glob("*.json")})
    assert sorted(blocks) == users
    url = f"sqlite:///{db}"
    longest = 0
    for user in users:
        assembled = cli(url, "assemble", "--user", user, "-q", query, "--budget", "1500")
        assert assembled.exit_code == 0, assembled.stderr
        # byte for byte: no line broken at 80 columns (mid-tag), no padding, no colour
        assert assembled.stdout in done.stdout, user
        longest = max(longest, *(len(line) for line in assembled.stdout.splitlines()))
    assert longest > 80  # a line rich would have wrapped
