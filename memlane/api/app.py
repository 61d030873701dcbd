"""The HTTP front door's app: FastAPI over the facade, its routes (memlane.api.routes, a
module per resource, included in the order of the OpenAPI document), bearer API keys and
the runtime (memlane.api.deps), and the error shape and size limits of memlane.api.errors.

Serve it with `uvicorn --factory memlane.api.app:create_app`. Routes that call the facade
are plain `def`: the facade is synchronous, so FastAPI runs each call in its thread pool.
Regenerate the checked-in OpenAPI document with
`python -m memlane.api.app --write-openapi docs/openapi.json`.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from memlane.api import errors as api_errors
from memlane.api.access_log import access_log
from memlane.api.deps import TRANSCRIPTS_PATH, Runtime
from memlane.api.metrics import ApiMetrics
from memlane.api.routes import (
    context,
    health,
    ingest,
    items,
    jobs,
    keys,
    memories,
    users,
    webhooks,
)
from memlane.api.ui import install as install_inspector
from memlane.config import startup
from memlane.config.settings import Settings
from memlane.service.facade import Memlane

log = logging.getLogger("memlane.api")


# --------------------------------------------------------------------------- the app


class _Timed:
    """The metrics' request timing as a middleware class (ApiMetrics.timing)."""

    def __init__(self, app: ASGIApp, metrics: ApiMetrics) -> None:
        self._timed = metrics.timing(app)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._timed(scope, receive, send)


def create_app(lane: Memlane | None = None, settings: Settings | None = None) -> FastAPI:
    """The API over `lane`, or over a lane built from `settings` (default: the
    environment) at startup. Reads nothing until it starts or gets a request."""
    runtime = Runtime(lane, settings)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        _ = runtime.settings  # invalid settings stop the server at start
        if lane is None:  # the app builds its lane: on a database the user named
            startup.require_database(runtime.settings, "the HTTP API")
        startup.log_start(runtime.settings, "api")
        try:
            await run_in_threadpool(lambda: runtime.lane().warm_process())  # before any request
        except Exception as exc:  # the database may come up later; /readyz says why not
            log.warning("memlane not ready at start (retried on first request): %s", exc)
        yield
        await runtime.close_limiter()
        await run_in_threadpool(runtime.close)

    # /docs (Swagger UI) and /redoc with their scripts and styles served from the
    # fastapi-offline package: FastAPI's own pages load them from a CDN, blank offline.
    app = FastAPIOffline(
        title="memlane",
        version=version("memlane"),
        description="Long-term memory for LLM chat apps. Errors: "
        '`{"error": {"code": "...", "message": "..."}}` with stable codes.',
        lifespan=lifespan,
    )
    app.state.runtime = runtime
    app.state.metrics = ApiMetrics(lambda: runtime.settings.resolved_database_url)
    app.add_middleware(_Timed, metrics=app.state.metrics)
    app.add_middleware(access_log)
    for routes in (ingest, jobs, users, context, memories, items, keys, webhooks, health):
        app.include_router(routes.router)
    install_inspector(app)  # the /ui pages (memlane.api.ui)
    api_errors.install(
        app,
        max_body_bytes=lambda: runtime.settings.max_body_bytes,
        transcript_paths={TRANSCRIPTS_PATH},
    )
    return app


def openapi_document() -> dict[str, Any]:
    return create_app().openapi()


def render_openapi() -> str:
    return json.dumps(openapi_document(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memlane.api.app")
    parser.add_argument("--write-openapi", metavar="PATH", required=True, type=Path)
    args = parser.parse_args(argv)
    target: Path = args.write_openapi
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_openapi(), encoding="utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
