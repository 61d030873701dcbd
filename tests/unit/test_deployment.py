"""docker-compose cannot run here (no Docker engine), so its contract is checked by
reading it: every service's command agrees with the Procfile, the queues and settings."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from memlane.config.queues import TASK_ROUTES, Queue
from memlane.config.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def procfile() -> dict[str, list[str]]:
    entries = {}
    for line in (ROOT / "Procfile").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, command = line.split(":", 1)
            entries[name.strip()] = shlex.split(command)
    return entries


def option(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


def test_the_procfile_has_every_process_type() -> None:
    assert {"web", "worker", "extract", "beat", "flower"} <= set(procfile())


def test_compose_has_every_service_with_healthchecks_where_they_run_long() -> None:
    services = compose()["services"]
    assert {"postgres", "redis", "migrate", "api", "worker", "extract", "beat", "flower"} <= set(
        services
    )
    assert services["postgres"]["image"].startswith("pgvector/pgvector")
    for name in ("postgres", "redis", "api", "worker", "extract", "flower"):
        assert "healthcheck" in services[name], name
    for name in ("api", "worker", "extract", "beat", "flower"):
        assert services[name]["depends_on"]["migrate"]["condition"] == (
            "service_completed_successfully"
        )
    assert services["migrate"]["command"] == ["memlane", "db", "upgrade"]


@pytest.mark.parametrize(("service", "process"), [("worker", "worker"), ("extract", "extract")])
def test_compose_workers_match_the_procfile(service: str, process: str) -> None:
    argv = compose()["services"][service]["command"]
    proc = procfile()[process]
    assert argv[:4] == proc[:4] == ["celery", "-A", "memlane.workers.app", "worker"]
    for flag in ("-Q", "--pool"):
        assert option(argv, flag) == option(proc, flag), flag


def test_every_queue_is_consumed_and_every_routed_task_has_a_consumer() -> None:
    consumed = set()
    for argv in [
        *procfile().values(),
        *(s.get("command") or [] for s in compose()["services"].values()),
    ]:
        if isinstance(argv, list) and "-Q" in argv:
            consumed |= set(option(argv, "-Q").split(","))
    assert consumed == {q.value for q in Queue}
    assert {route["queue"] for route in TASK_ROUTES.values()} <= consumed
    assert option(procfile()["extract"], "--pool") == "threads"  # LLM-bound: overlap waits


def test_compose_sets_only_real_settings_and_commits_no_secret() -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    fields = {f"MEMLANE_{name.upper()}" for name in Settings.model_fields}
    used = set(re.findall(r"\b(MEMLANE_[A-Z_]+)\s*:", text))
    assert used and used <= fields, used - fields
    for secret in ("POSTGRES_PASSWORD", "FLOWER_BASIC_AUTH"):
        assert re.search(r"\$\{" + secret + r":\?", text), f"{secret} must be required"
    assert not re.search(r"(?i)password\s*:\s*[\"']?[a-z0-9]{4,}", text)


def test_flower_is_behind_basic_auth() -> None:
    for argv in (procfile()["flower"], compose()["services"]["flower"]["command"]):
        assert any(a.startswith("--basic-auth=${FLOWER_BASIC_AUTH") for a in argv), argv


def _as_run(argv: list[str]) -> list[str]:
    """A command with each variable at its default (`${X:-d}` → d) and each required one
    named alone (`${X:?why}` → `${X}`), so the Procfile and compose compare."""
    return [
        re.sub(r"\$\{(\w+):\?[^}]*\}", r"${\1}", re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", a))
        for a in argv
    ]


@pytest.mark.parametrize(
    ("service", "process"),
    [
        ("migrate", "release"),
        ("api", "web"),
        ("worker", "worker"),
        ("extract", "extract"),
        ("beat", "beat"),
        ("flower", "flower"),
    ],
)
def test_compose_runs_the_procfile_command_lines(service: str, process: str) -> None:
    assert _as_run(compose()["services"][service]["command"]) == _as_run(procfile()[process])


def test_flower_options_carry_their_values_with_an_equals_sign() -> None:
    # tornado's options parser reads `--port 5555` as a flag without a value
    for argv in (procfile()["flower"], compose()["services"]["flower"]["command"]):
        options = [a for a in argv if a.startswith("--")]
        assert options and all("=" in a for a in options), argv


def test_the_image_runs_as_a_user_and_carries_the_local_embedder() -> None:
    lines = [line.strip() for line in (ROOT / "Dockerfile").read_text().splitlines()]
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users and users[-1] not in ("root", "0")
    installs = " ".join(line for line in lines if "pip install" in line)
    assert '".[minilm]"' in installs
    # the user runs the CMD: nothing after USER needs root
    after = lines[lines.index(f"USER {users[-1]}") :]
    assert not any(line.startswith("RUN ") for line in after)


def test_flower_is_published_on_the_hosts_loopback_only() -> None:
    # Flower's /metrics ignores --basic-auth (tests/integration/test_procfile.py)
    assert compose()["services"]["flower"]["ports"] == ["127.0.0.1:5555:5555"]
