"""memlane's log handler writes to stderr as it is at each record: a CLI runner or a test
harness swaps stderr and closes its stream while background threads still log."""

from __future__ import annotations

import io
import logging

import pytest

from memlane.config.logging import configure_logging


@pytest.fixture
def memlane_logger() -> logging.Logger:
    """memlane's logger without a handler of configure_logging's (the autouse fixture in
    tests/conftest.py puts back what the test found)."""
    root = logging.getLogger("memlane")
    root.handlers = [h for h in root.handlers if not getattr(h, "_memlane", False)]
    return root


def test_records_go_to_the_stderr_of_their_moment(
    memlane_logger: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = io.StringIO()
    monkeypatch.setattr("sys.stderr", first)
    configure_logging("DEBUG")
    logging.getLogger("memlane.assembly").debug("pack one")
    assert "pack one" in first.getvalue()

    later = io.StringIO()
    monkeypatch.setattr("sys.stderr", later)
    first.close()  # as a CLI runner closes the stream it swapped in
    logging.getLogger("memlane.assembly").debug("pack two")
    assert "DEBUG memlane.assembly pack two" in later.getvalue()
    assert "Logging error" not in later.getvalue()


def test_configuring_twice_adds_no_second_handler(memlane_logger: logging.Logger) -> None:
    configure_logging("INFO")
    configure_logging("WARNING")
    assert sum(getattr(h, "_memlane", False) for h in memlane_logger.handlers) == 1
    assert memlane_logger.level == logging.WARNING
