"""Settings refuse mistakes: a bad value stops memlane and names the variable; an unknown
MEMLANE_* variable is named with the closest real one; every setting is read somewhere."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest

import memlane
from memlane.config import settings as settings_module
from memlane.config.settings import Settings, SettingsError, load_settings, unknown_variables

PACKAGE = Path(memlane.__file__).parent


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(__import__("os").environ):
        if name.startswith("MEMLANE_"):
            monkeypatch.delenv(name)
    monkeypatch.setattr(settings_module, "_warned", set())


def refused(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> str:
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert name in str(caught.value)
    return str(caught.value)


def test_unprefixed_weight_names_change_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RELEVANCE", "IMPORTANCE", "RECENCY", "FREQUENCY"):
        monkeypatch.setenv(name, "0.9")
    assert load_settings().weights.relevance == 0.40
    for name, value in (("RELEVANCE", "0.7"), ("IMPORTANCE", "0.1"), ("RECENCY", "0.1")):
        monkeypatch.setenv(f"MEMLANE_WEIGHTS__{name}", value)
    weights = load_settings().weights
    assert (weights.relevance, weights.importance, weights.frequency) == (0.7, 0.1, 0.1)


def test_the_facade_names_a_bad_setting_as_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a chat app catching memlane's own errors catches a bad setting too
    monkeypatch.setenv("MEMLANE_LOG_LEVEL", "LOUD")
    with pytest.raises(memlane.ConfigurationError, match="MEMLANE_LOG_LEVEL"):
        memlane.Memlane.from_settings()


def test_the_log_level_is_a_level(monkeypatch: pytest.MonkeyPatch) -> None:
    refused(monkeypatch, "MEMLANE_LOG_LEVEL", "LOUD")
    monkeypatch.setenv("MEMLANE_LOG_LEVEL", "debug")
    assert load_settings().log_level == "DEBUG"


@pytest.mark.parametrize("url", ["http://foo", "redis", "kafka://127.0.0.1:9092"])
def test_a_broker_url_names_a_transport(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    assert "redis://" in refused(monkeypatch, "MEMLANE_BROKER_URL", url)


@pytest.mark.parametrize("url", ["redis://127.0.0.1:6379/0", "amqp://guest@127.0.0.1//"])
def test_real_brokers_are_taken(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("MEMLANE_BROKER_URL", url)
    assert load_settings().broker_url == url


@pytest.mark.parametrize(
    ("url", "read"),
    [
        ("postgres://app@db:5432/memlane", "postgresql+psycopg://app@db:5432/memlane"),
        ("postgresql://app@db/memlane", "postgresql+psycopg://app@db/memlane"),
        ("postgresql+psycopg://app@db/m", "postgresql+psycopg://app@db/m"),
        ("sqlite:///memlane.db", "sqlite:///memlane.db"),
    ],
)
def test_platform_database_urls_are_taken(
    monkeypatch: pytest.MonkeyPatch, url: str, read: str
) -> None:
    monkeypatch.setenv("MEMLANE_DATABASE_URL", url)
    assert load_settings().database_url == read


def test_other_databases_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "postgres://" in refused(monkeypatch, "MEMLANE_DATABASE_URL", "mysql://db/m")


def test_a_misspelt_embedder_is_refused_with_the_name_meant(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert "'minilm'" in refused(monkeypatch, "MEMLANE_EMBEDDING_MODEL", "minilmm")
    for name in ("minilm", "hashing", "text-embedding-3-small", "openai/minilm-like"):
        monkeypatch.setenv("MEMLANE_EMBEDDING_MODEL", name)
        assert load_settings().embedding_model == name


def test_an_unknown_variable_is_named_on_stderr_with_the_closest_setting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MEMLANE_DATABSE_URL", "sqlite:///x.db")
    monkeypatch.setenv("MEMLANE_TEST_WORKRS", "1")  # memlane's own are listed by name
    monkeypatch.setenv("MEMLANE_ZQX", "1")
    for name in ("MEMLANE_TEST_PG_DB", "MEMLANE_BENCH_DB_SUFFIX", "MEMLANE_WORKER_CONCURRENCY"):
        monkeypatch.setenv(name, "1")
    monkeypatch.setenv("MEMLANE_WEIGHTS__RELEVANCE", "0.40")
    logging.getLogger("memlane").addHandler(logging.NullHandler())  # as the CLI, no --debug
    assert load_settings().database_url is None
    load_settings()  # once a process
    assert capsys.readouterr().err.splitlines() == [
        "warning: MEMLANE_DATABSE_URL is not a memlane setting and is ignored; "
        "did you mean MEMLANE_DATABASE_URL?",
        "warning: MEMLANE_TEST_WORKRS is not a memlane setting and is ignored; "
        "did you mean MEMLANE_TEST_WORKERS?",
        "warning: MEMLANE_ZQX is not a memlane setting and is ignored",
    ]


def test_an_empty_variable_is_an_unset_one(monkeypatch: pytest.MonkeyPatch) -> None:
    # compose passes `${MEMLANE_X:-}` for a setting whose default is unset
    for name in ("MESSAGE_RETENTION_DAYS", "LLM_MODEL", "LLM_API_BASE", "EMBEDDING_MODEL"):
        monkeypatch.setenv(f"MEMLANE_{name}", "")
    settings = load_settings()
    assert (settings.message_retention_days, settings.llm_model, settings.llm_api_base) == (
        None,
        None,
        None,
    )
    assert settings.embedding_model == Settings.model_fields["embedding_model"].default


def test_with_a_broker_there_is_no_implicit_database(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings().resolved_database_url.endswith("/memlane.db")  # one process
    monkeypatch.setenv("MEMLANE_BROKER_URL", "redis://127.0.0.1:6379/0")
    with pytest.raises(SettingsError, match=r"^MEMLANE_DATABASE_URL is not set: with MEMLANE_B"):
        _ = load_settings().resolved_database_url
    monkeypatch.setenv("MEMLANE_DATABASE_URL", "sqlite:///shared.db")
    assert load_settings().resolved_database_url == "sqlite:///shared.db"


def test_memlanes_own_files_use_no_unknown_variable() -> None:
    root = PACKAGE.parent
    used = set()
    for path in [
        *root.glob("memlane/**/*.py"),
        *root.glob("scripts/*"),
        *root.glob(".ci/*"),
        *root.glob(".github/**/*.yml"),
        *root.glob("bench/**/*.py"),
        *root.glob("tests/**/*.py"),
        root / "Procfile",
        root / "docker-compose.yml",
        root / "Dockerfile",
        root / "README.md",
        *root.glob("docs/**/*.md"),
        *root.glob("docs/**/*.py"),
        root / "docs" / "gen" / "settings.yaml",
    ]:
        used |= set(
            __import__("re").findall(r"\bMEMLANE_[A-Z][A-Z0-9_]*[A-Z0-9]\b", path.read_text())
        )
    # the misspellings the tests and the README show on purpose
    shown = {"MEMLANE_DATABSE_URL", "MEMLANE_X", "MEMLANE_TEST_WORKRS", "MEMLANE_ZQX"}
    shown |= {"MEMLANE_EMBEDING_MODEL", "MEMLANE_SOMETHING_ELSE", "MEMLANE_SWEEP_EVERY_SECONDS"}
    strays = set(unknown_variables(dict.fromkeys(used, ""))) - shown
    assert strays == set()
    # and NOT_SETTINGS lists no name no file reads any more
    assert set(settings_module.NOT_SETTINGS) <= used


def test_every_setting_is_read_outside_the_settings() -> None:
    read: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        if path.parent.name == "config":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute):
                read.add(node.attr)
    # a field read through a property of Settings that is read (resolved_database_url)
    tree = ast.parse((PACKAGE / "config" / "settings.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in read:
            read |= {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
    assert set(Settings.model_fields) - read == set()
