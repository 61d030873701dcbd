"""The Procfile runs as written: every process is started by its exact command line (the
variables filled in by a shell, as a platform does) against the test database and Redis,
and probed: the release migrates, the API answers, both workers answer a ping, beat
runs and Flower lists the workers behind basic auth. docker-compose, which cannot run
here, must say the same (tests/unit/test_deployment.py reads it)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from celery import Celery

from tests.integration.fleet import ROOT, fleet_env, stop_group
from tests.integration.test_flower import AUTH, free_port, wait_until_up

pytestmark = pytest.mark.timeout(240)


def procfile() -> dict[str, str]:
    entries = {}
    for line in (ROOT / "Procfile").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, command = line.split(":", 1)
            entries[name.strip()] = command.strip()
    return entries


def start(command: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """`command` through a shell, as a Procfile runner starts it, in its own group."""
    return subprocess.Popen(
        ["/bin/sh", "-c", f"exec {command}"],
        cwd=ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop(proc: subprocess.Popen[bytes]) -> None:
    stop_group(proc)


def test_every_procfile_process_starts_by_its_command_line(
    pg: str, redis_url: str, tmp_path: Path
) -> None:
    commands = procfile()
    assert set(commands) == {"release", "web", "worker", "extract", "webhooks", "beat", "flower"}
    web_port, flower_port = free_port(), free_port()
    bin_dir = str(Path(sys.executable).parent)  # memlane and celery, as installed
    deployment = {
        "MEMLANE_DATABASE_URL": pg,
        "MEMLANE_BROKER_URL": redis_url,
        "MEMLANE_API_KEYS": "deploy-key",  # web listens on 0.0.0.0: it refuses without
        "PORT": str(web_port),
        "FLOWER_PORT": str(flower_port),
        "FLOWER_BASIC_AUTH": f"{AUTH[0]}:{AUTH[1]}",
        "MEMLANE_WORKER_CONCURRENCY": "1",
        "MEMLANE_EXTRACT_CONCURRENCY": "2",
    }
    assert set(deployment) == set(readme_variables())  # the deployment page names what is set here
    env = {
        **os.environ,
        **fleet_env(pg, redis_url),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        **deployment,
    }
    release = subprocess.run(
        ["/bin/sh", "-c", commands["release"]], cwd=ROOT, env=env, capture_output=True, timeout=120
    )
    assert release.returncode == 0, release.stderr.decode()[-2000:]
    running = {
        name: start(commands[name], env, tmp_path / f"{name}.log")
        for name in ("web", "worker", "extract", "webhooks", "beat", "flower")
    }

    def logs() -> str:
        return "\n".join(
            f"--- {name}\n{(tmp_path / f'{name}.log').read_text(errors='replace')[-1500:]}"
            for name in running
        )

    try:
        wait_until_up(f"http://127.0.0.1:{web_port}/healthz", timeout=60)
        hosts = {name.split("@")[0] for name in ping_all(redis_url, expected=3)}
        assert hosts == {"worker", "extract", "webhooks"}, logs()
        wait_until_up(f"http://127.0.0.1:{flower_port}/healthcheck", timeout=60)
        flower = f"http://127.0.0.1:{flower_port}/api/workers"
        assert httpx.get(flower, timeout=10).status_code == 401
        deadline = time.monotonic() + 60
        seen: dict = {}
        while time.monotonic() < deadline and len(seen) < 3:
            seen = httpx.get(f"{flower}?refresh=1", auth=AUTH, timeout=20).json()
            time.sleep(0.5)
        assert {name.split("@")[0] for name in seen} == {"worker", "extract", "webhooks"}, logs()
        # Flower serves /metrics to anyone, basic auth or not: docs/deployment.md says so, and how
        # to keep it private.
        metrics = httpx.get(f"http://127.0.0.1:{flower_port}/metrics", timeout=10)
        assert metrics.status_code == 200 and "flower_" in metrics.text
        assert "beat: Starting" in (tmp_path / "beat.log").read_text(), logs()
        for name, proc in running.items():
            assert proc.poll() is None, f"{name} exited\n{logs()}"
    finally:
        for proc in running.values():
            stop(proc)


def readme_deployment() -> str:
    """The docs' deployment page (it was the README's section)."""
    return (ROOT / "docs" / "deployment.md").read_text(encoding="utf-8")


def readme_variables() -> list[str]:
    """The variables of the deployment page's table (its first column)."""
    table = readme_deployment().split("| variable | for |", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^\| `([A-Z_]+)` \|", table, flags=re.M)


def test_the_readme_deployment_is_the_procfile_this_test_runs() -> None:
    block = readme_deployment().split("```Procfile\n", 1)[1].split("```", 1)[0]
    assert block == (ROOT / "Procfile").read_text(encoding="utf-8")
    assert len(readme_variables()) == 8
    for name, command in procfile().items():
        for variable in re.findall(r"\$\{(\w+)", command):
            assert variable in readme_variables(), (name, variable)


def ping_all(redis_url: str, *, expected: int, timeout: float = 60.0) -> list[str]:
    """The names of the workers that answer a ping on `redis_url`."""
    probe = Celery("probe", broker=redis_url)
    deadline = time.monotonic() + timeout
    names: list[str] = []
    while time.monotonic() < deadline:
        replies = probe.control.ping(timeout=2.0) or []
        names = sorted(name for reply in replies for name in reply)
        if len(names) >= expected:
            return names
        time.sleep(0.5)
    return names
