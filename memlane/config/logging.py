"""Logging set-up: plain lines for people, and the `memlane.assembly` logger whose records
are one JSON object each (context packs)."""

from __future__ import annotations

import logging
import sys
from typing import TextIO

ASSEMBLY_LOGGER = "memlane.assembly"


class StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to `sys.stderr` as it is when a record is emitted, not as it was when the
    handler was made: whoever runs memlane in-process (a CLI runner, a test harness) may
    swap stderr and close the stream it swapped in, while memlane's background threads
    still log (a pack written after `memlane --debug …` returned)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _: TextIO) -> None:
        pass  # always the current sys.stderr


def configure_logging(level: str = "INFO") -> None:
    root = logging.getLogger("memlane")
    if any(getattr(h, "_memlane", False) for h in root.handlers):
        root.setLevel(level)
        return
    handler = StderrHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    handler._memlane = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level)
