"""Logging set-up: plain lines for people, and the `memlane.assembly` logger whose records
are one JSON object each (context packs)."""

from __future__ import annotations

import logging

ASSEMBLY_LOGGER = "memlane.assembly"


def configure_logging(level: str = "INFO") -> None:
    root = logging.getLogger("memlane")
    if any(getattr(h, "_memlane", False) for h in root.handlers):
        root.setLevel(level)
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    handler._memlane = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level)
