"""What every route of the HTTP API depends on: the app's runtime (its settings and lane,
resolved on first need), the lane, the API key and the actor it names, the metrics, and
the /v1 router's shared shape (its key check and error answers)."""

from __future__ import annotations

import threading
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi import Path as PathParam
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from memlane.api.errors import ApiError, ErrorOut
from memlane.api.metrics import ApiMetrics
from memlane.config.settings import Settings, get_settings
from memlane.pipeline import error_codes as codes
from memlane.service.api_keys import key_actor
from memlane.service.facade import Memlane

TRANSCRIPTS_PATH = "/v1/transcripts"


class Runtime:
    """One app's settings and lane, resolved on first need; a lane built here is closed
    on shutdown, a lane handed in belongs to the caller."""

    def __init__(self, lane: Memlane | None, settings: Settings | None) -> None:
        self._lane = lane
        self._settings = settings or (lane.settings if lane is not None else None)
        self._owns_lane = lane is None
        self._lock = threading.Lock()

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = get_settings()
        return self._settings

    @property
    def built(self) -> Memlane | None:
        """The lane once built (one attribute read: no lock needed)."""
        return self._lane

    def lane(self) -> Memlane:
        with self._lock:
            if self._lane is None:
                self._lane = Memlane(self.settings)
            return self._lane

    def close(self) -> None:
        with self._lock:
            if self._owns_lane and self._lane is not None:
                self._lane.close()
                self._lane = None


# --------------------------------------------------------------------------- dependencies


def runtime_of(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


async def get_lane(request: Request) -> Memlane:
    # async, so a request does not hop to the thread pool and back just to be handed the
    # lane; building it (when the start could not) blocks, so that runs in the pool
    runtime = runtime_of(request)
    lane = runtime.built
    return lane if lane is not None else await run_in_threadpool(runtime.lane)


bearer = HTTPBearer(auto_error=False, description="an API key from MEMLANE_API_KEYS")


async def require_key(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> None:
    """With keys configured, the bearer token must equal one of them (constant time).
    The key's name becomes the actor of the changes the request makes."""
    keys = runtime_of(request).settings.api_keys
    given = credentials.credentials if credentials is not None else ""
    actor = key_actor(given, keys)
    if actor is None:
        raise ApiError(codes.UNAUTHORIZED, "send a valid API key: Authorization: Bearer <key>")
    request.state.actor = actor


def actor_of(request: Request) -> str:
    return str(getattr(request.state, "actor", "api"))


Lane = Annotated[Memlane, Depends(get_lane)]
Actor = Annotated[str, Depends(actor_of)]
UserId = Annotated[str, PathParam(min_length=1, max_length=200)]
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorOut} for status in (401, 404, 409, 413, 422, 500, 503)
}


def v1_router() -> APIRouter:
    """A router of /v1 routes: an API key required, the error answers documented."""
    return APIRouter(prefix="/v1", dependencies=[Depends(require_key)], responses=ERRORS)


def metrics_of(request: Request) -> ApiMetrics:
    metrics: ApiMetrics = request.app.state.metrics
    return metrics
