"""memlane.config.startup: the refusals' rules, the masking of secrets and the start line
(tests/integration/test_startup_guards.py runs the processes that use them)."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from memlane.config import startup
from memlane.config.settings import Settings, SettingsError


def settings(**values: object) -> Settings:
    return Settings(_env_file=None, **values)  # type: ignore[call-arg,arg-type]


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql+psycopg://app:s3cret@db:5432/memlane", "postgresql+psycopg://app:***@db:5432/memlane"),
        ("redis://:s3cret@redis:6379/0", "redis://:***@redis:6379/0"),
        ("redis://default:p%40ss@redis:6379/0", "redis://default:***@redis:6379/0"),
        ("postgresql://db/memlane?user=app&password=s3cret", "postgresql://db/memlane?user=app&password=***"),
        ("sentinel://:a1@h1:26379;sentinel://:b2@h2:26379", "sentinel://:***@h1:26379;sentinel://:***@h2:26379"),
        # nothing to hide: as written
        ("sqlite:///memlane.db", "sqlite:///memlane.db"),
        ("sqlite:////srv/memlane.db", "sqlite:////srv/memlane.db"),
        ("postgresql://app@db/memlane", "postgresql://app@db/memlane"),
        ("redis://redis:6379/0", "redis://redis:6379/0"),
    ],
)  # fmt: skip
def test_urls_are_shown_without_their_password(url: str, shown: str) -> None:
    assert startup.masked(url) == shown


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_needs_no_key(host: str) -> None:
    startup.require_auth(settings(), host, "memlane serve", allowed=False)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.5", "api.example.com"])
def test_another_address_needs_a_key_or_an_explicit_yes(host: str) -> None:
    with pytest.raises(SettingsError, match=r"^MEMLANE_API_KEYS is not set: memlane serve"):
        startup.require_auth(settings(), host, "memlane serve", allowed=False)
    startup.require_auth(settings(api_keys=[SecretStr("k")]), host, "memlane serve", allowed=False)
    startup.require_auth(settings(), host, "memlane serve", allowed=True)


def test_a_server_needs_its_database_named() -> None:
    with pytest.raises(SettingsError, match=r"^MEMLANE_DATABASE_URL is not set: memlane serve"):
        startup.require_database(settings(), "memlane serve")
    startup.require_database(settings(database_url="sqlite:///memlane.db"), "memlane serve")


def test_the_start_line_names_what_the_process_runs_on_in_one_line() -> None:
    line = startup.start_line(
        settings(
            database_url="postgres://app:s3cret@db/memlane",
            broker_url="redis://:hunter2@redis:6379/0",
            llm_model="gpt-4o-mini",
            embedding_model="minilm",
            api_keys=[SecretStr("a"), SecretStr("b")],
            working_set_mb=256,
        ),
        "worker",
    )
    assert line == (
        "memlane worker: database postgresql+psycopg://app:***@db/memlane; broker "
        "redis://:***@redis:6379/0; embedder minilm; extractor gpt-4o-mini; auth on (2 keys); "
        "working set 256 MB"
    )
    embedded = startup.start_line(
        settings(database_url="sqlite:///m.db", allow_unauthenticated=True, working_set_mb=0),
        "api",
    )
    assert "broker none (jobs run in-process)" in embedded
    assert "extractor offline (rule-based)" in embedded
    assert "auth off (allowed by MEMLANE_ALLOW_UNAUTHENTICATED)" in embedded
    assert embedded.endswith("working set off (0 MB)") and "\n" not in embedded


def test_a_refusal_in_a_process_celery_started_is_one_line_and_exit_2(
    capfd: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        startup.exit_unless(lambda: startup.require_database(settings(), "a memlane worker"))
    assert exited.value.code == 2
    err = capfd.readouterr().err
    assert err.startswith("error: MEMLANE_DATABASE_URL is not set: a memlane worker")
    assert err.count("\n") == 1
