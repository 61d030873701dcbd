"""The HTTP API's access log: one line per request on the `memlane.api.access` logger,
`METHOD path status ms key=<name>`, the key named as memory histories name it (never the
key itself; `-` before a key was checked or with none). It replaces uvicorn's own
access log, which cannot know the key (`memlane serve` turns that one off)."""

from __future__ import annotations

import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("memlane.api.access")


class AccessLog:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})  # where the key check leaves its grant
        started, status = time.perf_counter(), 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            key = state.get("key")
            name = getattr(key, "actor", None) or "-"
            log.info(
                "%s %s %d %.1fms key=%s",
                scope["method"],
                scope["path"],
                status,
                (time.perf_counter() - started) * 1000,
                name,
            )
