"""The HTTP API's access log: one line per request on the `memlane.api.access` logger,
`METHOD path status ms key=<name>`, the key named as memory histories name it (never the
key itself; `-` before a key was checked or with none). It replaces uvicorn's own
access log, which cannot know the key (`memlane serve` turns that one off)."""

from __future__ import annotations

import logging

from starlette.types import ASGIApp, Scope

from memlane.api.observed import after_each_request

log = logging.getLogger("memlane.api.access")


def _logged(scope: Scope, status: int, seconds: float) -> None:
    key = scope["state"].get("key")  # where the key check leaves its grant
    name = getattr(key, "actor", None) or "-"
    log.info("%s %s %d %.1fms key=%s", scope["method"], scope["path"], status, seconds * 1000, name)


def access_log(app: ASGIApp) -> ASGIApp:
    """`app` writing the access log (module docstring); a Starlette middleware factory."""
    return after_each_request(app, _logged)
