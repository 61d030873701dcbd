"""docker-compose cannot run here (no Docker engine), so its contract is checked by
reading it: every service's command agrees with the Procfile, the queues and settings."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest
import yaml

from memlane.config.queues import TASK_ROUTES, Queue
from memlane.config.settings import Settings, setting_variables

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


@pytest.mark.parametrize(
    ("service", "process"),
    [("worker", "worker"), ("extract", "extract"), ("webhooks", "webhooks")],
)
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


# the services' own: compose's PostgreSQL and Redis, not a default
SERVICE_URLS = {"MEMLANE_DATABASE_URL", "MEMLANE_BROKER_URL"}


def compose_settings() -> dict[str, str]:
    environment = compose()["x-memlane"]["environment"]
    return {k: v for k, v in environment.items() if k.startswith("MEMLANE_")}


def test_compose_sets_only_real_settings_and_commits_no_secret() -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    used = {
        name
        for service in compose()["services"].values()
        for name in service.get("environment") or {}
        if name.startswith("MEMLANE_")
    }
    assert used and used <= set(setting_variables()), used - set(setting_variables())
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
        ("webhooks", "webhooks"),
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
    # every part the Procfile runs (server, fleet, Flower, PostgreSQL) and the MiniLM embedder
    assert '".[all]"' in installs
    # the user runs the CMD: nothing after USER needs root
    after = lines[lines.index(f"USER {users[-1]}") :]
    assert not any(line.startswith("RUN ") for line in after)


def test_flower_is_published_on_the_hosts_loopback_only() -> None:
    # Flower's /metrics ignores --basic-auth (tests/integration/test_procfile.py)
    assert compose()["services"]["flower"]["ports"] == ["127.0.0.1:5555:5555"]


def test_compose_passes_every_setting_through_with_the_settings_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = compose_settings()
    # every variable a setting is read from (the weights by their parts)
    assert set(settings) == set(setting_variables()) - {"MEMLANE_WEIGHTS"}
    defaults = {}
    for name, value in settings.items():
        if name in SERVICE_URLS:
            continue
        passed = re.fullmatch(r"\$\{(\w+):-([^}]*)\}", value)
        assert passed and passed.group(1) == name, f"{name}: {value}"
        defaults[name] = passed.group(2)  # empty: unset, the settings' own default
    # what the services read when the host sets none of them, against the class's defaults
    for name in list(os.environ):
        if name.startswith("MEMLANE_"):
            monkeypatch.delenv(name)
    declared = Settings(_env_file=None).model_dump()  # type: ignore[call-arg]
    for name, value in defaults.items():
        monkeypatch.setenv(name, value)
    read = Settings(_env_file=None).model_dump()  # type: ignore[call-arg]
    assert read == declared


def test_compose_does_not_pin_the_embedder() -> None:
    # the README's default is the settings' (the image installs the local embedder)
    assert compose_settings()["MEMLANE_EMBEDDING_MODEL"] == "${MEMLANE_EMBEDDING_MODEL:-}"
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "MEMLANE_" not in dockerfile.replace("MEMLANE_EMBEDDING_MODEL=minilm)", "")


def test_compose_api_is_refused_without_keys_unless_opted_in() -> None:
    settings = compose_settings()
    assert settings["MEMLANE_API_KEYS"] == "${MEMLANE_API_KEYS:-}"
    assert settings["MEMLANE_ALLOW_UNAUTHENTICATED"] == "${MEMLANE_ALLOW_UNAUTHENTICATED:-false}"
    assert option(compose()["services"]["api"]["command"], "--host") == "0.0.0.0"
    assert "--allow-unauthenticated" not in compose()["services"]["api"]["command"]


@pytest.mark.parametrize(
    ("service", "variable"),
    [("worker", "MEMLANE_WORKER_CONCURRENCY"), ("extract", "MEMLANE_EXTRACT_CONCURRENCY")],
)
def test_compose_workers_size_their_pools_as_the_procfile(service: str, variable: str) -> None:
    argv = compose()["services"][service]["command"]
    proc = procfile()[service]
    assert option(argv, "--concurrency") == option(proc, "--concurrency")
    assert option(argv, "--concurrency").startswith("${" + variable + ":-")


def test_one_postgresql_major_everywhere() -> None:
    image = compose()["services"]["postgres"]["image"]
    assert image == "pgvector/pgvector:pg15"
    script = (ROOT / "scripts" / "ensure_services.sh").read_text()
    assert 'PGVER="${MEMLANE_PG_MAJOR:-15}"' in script
    pages = [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    majors = {m for page in pages for m in re.findall(r"PostgreSQL (1\d)\b", page.read_text())}
    majors |= set(re.findall(r"PostgreSQL (1\d)\b", (ROOT / "bench" / "README.md").read_text()))
    assert majors == {"15"}


def _dockerignored(patterns: list[str], path: str) -> bool:
    """Docker's rule for the build context: the last matching pattern decides (`!`
    keeps), and a pattern that matches a folder matches all under it."""
    parts = path.split("/")
    ignored = False
    for pattern in patterns:
        keep = pattern.startswith("!")
        body = pattern.lstrip("!").strip("/")
        regex = re.escape(body).replace(r"\*\*/", "(.*/)?").replace(r"\*\*", ".*")
        regex = regex.replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
        regex = regex.replace(r"\[", "[").replace(r"\]", "]")
        if any(re.fullmatch(regex, "/".join(parts[:n])) for n in range(1, len(parts) + 1)):
            ignored = not keep
    return ignored


def test_the_build_context_keeps_what_the_image_copies_and_drops_the_checkouts_own() -> None:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    copied = [
        line.split()[1:-1]
        for line in (ROOT / "Dockerfile").read_text().splitlines()
        if line.startswith("COPY ")
    ]
    sources = [source for sources in copied for source in sources]
    assert {"pyproject.toml", "README.md", "memlane"} <= set(sources)
    for source in sources:
        for path in [source, *(p.relative_to(ROOT).as_posix() for p in (ROOT / source).rglob("*"))]:
            if "__pycache__" not in path:
                assert not _dockerignored(patterns, path), path
    for junk in (
        ".venv/bin/python",
        ".env",
        "memlane.db",
        "memlane-demo.db",
        "memlane.db-wal",
        "examples/memlane.db",
        ".git/HEAD",
        "memlane/__pycache__/app.cpython-311.pyc",
        ".mypy_cache/3.11/x.json",
        ".ruff_cache/x",
        ".pytest_cache/v/x",
        ".hypothesis/examples/x",
        "build/lib/memlane/__init__.py",
        "dist/memlane-0.1.0-py3-none-any.whl",
        "memlane.egg-info/PKG-INFO",
        "bench/results/locomo.json",
    ):
        assert _dockerignored(patterns, junk), junk


def test_the_settings_compose_gives_with_nothing_set_build_its_embedder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `${X:-default}` with X unset is the default; `${X:-}` is empty, which the settings read
    # as unset. An explicit default that contradicts another (a dimension the default
    # embedder does not make) would stop every service at its first embedding.
    from memlane.config.settings import load_settings
    from memlane.workers.embedders import get_embedder

    for name, value in compose_settings().items():
        if name not in SERVICE_URLS and isinstance(value, str):
            monkeypatch.setenv(name, re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", value))
    assert "MEMLANE_EMBEDDING_MODEL" in compose_settings()
    assert get_embedder(load_settings()).dim > 0
