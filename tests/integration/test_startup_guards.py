"""The mistakes that used to run silently are refused, or warned about, at start, by the
real processes: `celery -A memlane.workers.app worker|beat` and `memlane worker|serve|mcp`
and a CLI command, each run as a user runs it (a subprocess in a fresh working folder,
against the test Redis and PostgreSQL); and each long-running process names what it runs
on in one line (memlane.config.startup)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.integration.fleet import ROOT, stop_group
from tests.integration.test_flower import free_port, wait_until_up
from tests.integration.test_procfile import procfile

pytestmark = pytest.mark.timeout(180)

CELERY = [sys.executable, "-m", "celery", "-A", "memlane.workers.app"]
MEMLANE = [sys.executable, "-m", "memlane.cli.app"]
NO_DATABASE = "error: MEMLANE_DATABASE_URL is not set: "
NO_KEYS = "error: MEMLANE_API_KEYS is not set: "


def environment(**settings: str) -> dict[str, str]:
    """This environment without MEMLANE_* settings, with this checkout's memlane first
    (the processes run in a temporary folder, not the checkout), plus `settings`."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
    path = os.pathsep.join(p for p in (str(ROOT), clean.get("PYTHONPATH", "")) if p)
    return {**clean, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1", **settings}


def run(argv: list[str], cwd: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=environment(**settings), capture_output=True, text=True, timeout=90
    )


def refused(done: subprocess.CompletedProcess[str], prefix: str) -> str:
    """The one error line of a process that refused to start (exit 2)."""
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert len(errors) == 1 and errors[0].startswith(prefix), done.stderr[-2000:]
    return errors[0]


def start(argv: list[str], cwd: Path, log: Path, **settings: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        argv,
        cwd=cwd,
        env=environment(**settings),
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop(proc: subprocess.Popen[bytes]) -> None:
    stop_group(proc)


def wait_for(log: Path, text: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = log.read_text(errors="replace")
        if text in seen:
            return seen
        assert proc.poll() is None, f"exited {proc.returncode}:\n{seen[-3000:]}"
        time.sleep(0.2)
    raise AssertionError(f"{text!r} not logged in {timeout}s:\n{log.read_text()[-3000:]}")


def start_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if "database " in line and "; broker " in line]


# ------------------------------------------------------------ no implicit database


@pytest.mark.parametrize(
    "argv",
    [
        [*CELERY, "worker", "-Q", "ingest", "--pool", "solo", "-n", "w@%h", "-l", "INFO"],
        [*CELERY, "beat", "-l", "INFO", "--schedule", "beat-schedule"],
        [*MEMLANE, "worker", "--queues", "store"],
    ],
    ids=["celery-worker", "celery-beat", "memlane-worker"],
)
def test_a_fleet_process_with_a_broker_refuses_to_start_without_a_database(
    argv: list[str], redis_url: str, tmp_path: Path
) -> None:
    # before: the worker made an empty memlane.db here and retried `no such table: jobs`
    done = run(argv, tmp_path, MEMLANE_BROKER_URL=redis_url)
    line = refused(done, NO_DATABASE)
    assert str(tmp_path) in line and "postgresql://" in line
    assert not list(tmp_path.glob("memlane.db*"))


def test_a_cli_command_with_a_broker_refuses_the_implicit_database(
    redis_url: str, tmp_path: Path
) -> None:
    # its jobs would go to workers that cannot read a memlane.db made here
    done = run(
        [*MEMLANE, "memories", "list", "--user", "u1"], tmp_path, MEMLANE_BROKER_URL=redis_url
    )
    assert "MEMLANE_BROKER_URL" in refused(done, NO_DATABASE)
    assert not list(tmp_path.glob("memlane.db*"))


def test_a_misspelt_database_variable_stops_serve_and_is_named(tmp_path: Path) -> None:
    # before: serve made memlane.db and answered /healthz 200
    port = str(free_port())
    done = run(
        [*MEMLANE, "serve", "--port", port],
        tmp_path,
        MEMLANE_DATABSE_URL=f"sqlite:///{tmp_path / 'meant.db'}",
    )
    refused(done, NO_DATABASE + "memlane serve does not fall back")
    assert done.stderr.splitlines()[0] == (
        "warning: MEMLANE_DATABSE_URL is not a memlane setting and is ignored; "
        "did you mean MEMLANE_DATABASE_URL?"
    )
    assert list(tmp_path.iterdir()) == []


def test_the_embedded_default_stays_for_one_process(tmp_path: Path) -> None:
    done = run([*MEMLANE, "memories", "list", "--user", "u1"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "memlane.db").exists()
    assert done.stderr == ""  # no warning for the default used as meant


# ------------------------------------------------------------ no open server without keys


def test_serve_on_a_public_address_without_keys_is_refused(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'api.db'}"
    port = str(free_port())
    done = run([*MEMLANE, "serve", "--host", "0.0.0.0", "--port", port], tmp_path,
               MEMLANE_DATABASE_URL=db)  # fmt: skip
    line = refused(done, NO_KEYS + "memlane serve would listen on 0.0.0.0")
    assert "--allow-unauthenticated" in line and "MEMLANE_ALLOW_UNAUTHENTICATED=true" in line


@pytest.mark.parametrize(
    ("flag", "settings"),
    [
        (["--allow-unauthenticated"], {}),
        ([], {"MEMLANE_ALLOW_UNAUTHENTICATED": "true"}),
        ([], {"MEMLANE_API_KEYS": "k1"}),
    ],
    ids=["flag", "setting", "keys"],
)
def test_serve_on_a_public_address_starts_when_told_or_given_keys(
    flag: list[str], settings: dict[str, str], tmp_path: Path
) -> None:
    db = f"sqlite:///{tmp_path / 'api.db'}"
    port = free_port()
    log = tmp_path / "serve.log"
    argv = [*MEMLANE, "serve", "--host", "0.0.0.0", "--port", str(port), *flag]
    server = start(argv, tmp_path, log, MEMLANE_DATABASE_URL=db, **settings)
    try:
        wait_until_up(f"http://127.0.0.1:{port}/healthz", timeout=60)
        lines = start_lines(log.read_text())
        assert len(lines) == 1, log.read_text()
        auth = "auth on (1 key)" if settings.get("MEMLANE_API_KEYS") else "auth off"
        assert f"; {auth}" in lines[0]
        if settings.get("MEMLANE_API_KEYS"):
            assert httpx.get(f"http://127.0.0.1:{port}/v1/status", timeout=10).status_code == 401
    finally:
        stop(server)


def test_mcp_over_http_on_a_public_address_without_keys_is_refused(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'mcp.db'}"
    argv = [*MEMLANE, "mcp", "--user", "u1", "--transport", "http", "--host", "0.0.0.0"]
    done = run([*argv, "--port", str(free_port())], tmp_path, MEMLANE_DATABASE_URL=db)
    refused(done, NO_KEYS + "memlane mcp would listen on 0.0.0.0")


def test_the_procfile_web_line_needs_keys(pg: str, redis_url: str, tmp_path: Path) -> None:
    bin_dir = str(Path(sys.executable).parent)
    done = subprocess.run(
        ["/bin/sh", "-c", procfile()["web"]],
        cwd=tmp_path,
        env=environment(
            MEMLANE_DATABASE_URL=pg,
            MEMLANE_BROKER_URL=redis_url,
            PORT=str(free_port()),
            PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        ),
        capture_output=True,
        text=True,
        timeout=90,
    )
    refused(done, NO_KEYS + "memlane serve would listen on 0.0.0.0")


# ------------------------------------------------------------ unknown variables, start lines


def test_a_cli_command_warns_of_an_unknown_variable_without_debug(tmp_path: Path) -> None:
    done = run(
        [*MEMLANE, "memories", "list", "--user", "u1"],
        tmp_path,
        MEMLANE_DATABASE_URL=f"sqlite:///{tmp_path / 'm.db'}",
        MEMLANE_EMBEDING_MODEL="minilm",
        MEMLANE_SOMETHING_ELSE="1",
        # settings and memlane's own variables: no warning
        MEMLANE_WEIGHTS__RELEVANCE="0.40",
        MEMLANE_TEST_WORKERS="2",
        MEMLANE_WORKER_CONCURRENCY="2",
        MEMLANE_CLIENT_URL="http://127.0.0.1:8000",
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        "warning: MEMLANE_EMBEDING_MODEL is not a memlane setting and is ignored; "
        "did you mean MEMLANE_EMBEDDING_MODEL?",
        "warning: MEMLANE_SOMETHING_ELSE is not a memlane setting and is ignored",
    ]


def test_a_worker_and_beat_warn_of_unknown_variables_and_log_what_they_run_on(
    pg: str, redis_url: str, tmp_path: Path
) -> None:
    # a password in the database URL: trust authentication ignores it, the line masks it
    user, rest = pg.split("://", 1)[1].split("@", 1)
    with_password = f"postgresql+psycopg://{user.split(':')[0]}:hunter2@{rest}"
    settings = {
        "MEMLANE_DATABASE_URL": with_password,
        "MEMLANE_BROKER_URL": redis_url,
        "MEMLANE_WORKING_SET_MB": "64",
        "MEMLANE_API_KEYS": "k1,k2",
        "MEMLANE_SWEEP_EVERY_SECONDS": "5",
    }
    worker_log, beat_log = tmp_path / "worker.log", tmp_path / "beat.log"
    worker = start(
        [*CELERY, "worker", "-Q", "store", "--pool", "solo", "-n", "guard@%h", "-l", "INFO"],
        tmp_path,
        worker_log,
        **settings,
    )
    beat = start(
        [*CELERY, "beat", "-l", "INFO", "--schedule", str(tmp_path / "schedule")],
        tmp_path,
        beat_log,
        **settings,
    )
    try:
        for log, proc, process in ((worker_log, worker, "worker"), (beat_log, beat, "beat")):
            seen = wait_for(log, "ready." if process == "worker" else "beat: Starting", proc)
            seen = wait_for(log, f"memlane {process}: database", proc)
            lines = start_lines(seen)
            assert len(lines) == 1, seen
            line = lines[0].split(f"memlane {process}: ", 1)[1]
            assert line == (
                f"database postgresql+psycopg://{user.split(':')[0]}:***@{rest}; "
                f"broker {redis_url}; embedder {default_embedder()}; extractor offline "
                "(rule-based); auth on (2 keys); working set 64 MB"
            )
            assert "hunter2" not in seen
            assert seen.count("MEMLANE_SWEEP_EVERY_SECONDS is not a memlane setting") == 1
            assert "did you mean MEMLANE_SWEEP_EVERY_S?" in seen
    finally:
        stop(worker)
        stop(beat)


def test_mcp_names_what_it_serves_on_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [*MEMLANE, "mcp", "--user", "u1"],
        cwd=tmp_path,
        env=environment(MEMLANE_DATABASE_URL=f"sqlite:///{tmp_path / 'mcp.db'}"),
        stdin=subprocess.DEVNULL,  # the client hangs up at once: the server ends
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    assert start_lines(done.stderr) == [
        f"memlane mcp (stdio, user u1): database sqlite:///{tmp_path / 'mcp.db'}; broker none "
        f"(jobs run in-process); embedder {default_embedder()}; extractor offline "
        "(rule-based); auth off; working set 512 MB"
    ]
    assert done.stdout == ""  # stdout is the protocol's


def default_embedder() -> str:
    from tests.defaults import default

    name: str = default("embedding_model")
    return name
