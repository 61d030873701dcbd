"""Fixtures shared by every test. Services are real: PostgreSQL with pgvector and Redis
must be up (scripts/test.sh starts them); a test that needs one fails loudly without it."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests import scratch

# Offline: litellm must not try to fetch its remote cost map during tests.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# Property tests check what holds, never how fast: on a loaded machine (a busy CI
# runner, the suite's own workers beside it) drawing an example can take seconds, which
# Hypothesis would otherwise report as a failure (too_slow, or a deadline missed).
settings.register_profile("memlane", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("memlane")

EXAMPLES = Path(__file__).resolve().parent.parent / "memlane" / "cli" / "examples"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def pytest_configure(config: pytest.Config) -> None:
    """This run's slot (taken by the process that runs it, the xdist controller or the
    one process without xdist), and this process's scratch databases (tests/scratch.py)."""
    if "PYTEST_XDIST_WORKER" not in os.environ and scratch.SLOT_VARIABLE not in os.environ:
        os.environ[scratch.SLOT_VARIABLE] = str(scratch.take_slot())
    scratch.export_to_benchmarks()


@pytest.fixture(autouse=True)
def _isolated_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No test reads the developer's .env or MEMLANE_* variables by accident. The test
    and benchmark variables stay (they are no settings): they name this checkout's scratch
    databases, which a benchmark started by a test must use too, not another's."""
    for key in list(os.environ):
        if key.startswith("MEMLANE_") and not key.startswith(("MEMLANE_TEST_", "MEMLANE_BENCH_")):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    from memlane.config.settings import get_settings

    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


@pytest.fixture(autouse=True)
def _memlane_logging_restored() -> Iterator[None]:
    """memlane's logger as each test found it: the CLI's `--debug` runs in-process in the
    CLI tests and sets it to DEBUG, and every later test's pack writer would then print
    each pack it saves."""
    root = logging.getLogger("memlane")
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers, root.level = handlers, level


@pytest.fixture
def now() -> datetime:
    return NOW
