"""One plain-ASGI wrapper for what is told of each HTTP request once it has ended (the
access log, the latency metric). Plain ASGI: a BaseHTTPMiddleware would change how
errors raised while reading the body (413) reach their handlers."""

from __future__ import annotations

import time
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# (the request's scope, its response status, 500 if none was sent; seconds it took)
Ended = Callable[[Scope, int, float], None]


def after_each_request(app: ASGIApp, ended: Ended) -> ASGIApp:
    """`app`, calling `ended` once each HTTP request has been answered (or has failed)."""

    async def observed(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        scope.setdefault("state", {})  # the dict the app's request.state writes into
        started, status = time.perf_counter(), 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await app(scope, receive, sending)
        finally:
            ended(scope, status, time.perf_counter() - started)

    return observed
