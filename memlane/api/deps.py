"""What every route of the HTTP API depends on: the app's runtime (its settings, lane,
keyring and rate limiter, resolved on first need), the lane, the API key (its grant, the
actor it names, its rate limit), the scope each route declares (`needs`), the metrics,
and the /v1 router's shared shape (its key check and error answers).

Every route declares what it needs: `needs("read" | "write" | "admin")`, or `PUBLIC`
(health checks); tests/unit/test_route_scopes.py fails for a route that declares
neither. A route whose path names `{user_id}` is also refused, 404, to a key whose user
patterns do not reach that user; routes that take the user in the body or find it
through a job or pack call `reach` themselves.
"""

from __future__ import annotations

import threading
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from memlane.api.errors import ApiError, ErrorOut
from memlane.api.metrics import ApiMetrics
from memlane.config.settings import Settings, get_settings
from memlane.pipeline import error_codes as codes
from memlane.service.facade import Memlane
from memlane.service.keys.keyring import Keyring
from memlane.service.keys.rate_limit import RateLimiter, limit_of
from memlane.service.keys.reach import KeyGrant, Scope

TRANSCRIPTS_PATH = "/v1/transcripts"


class Runtime:
    """One app's settings and lane, resolved on first need; a lane built here is closed
    on shutdown, a lane handed in belongs to the caller."""

    def __init__(self, lane: Memlane | None, settings: Settings | None) -> None:
        self._lane = lane
        self._settings = settings or (lane.settings if lane is not None else None)
        self._owns_lane = lane is None
        self._lock = threading.Lock()
        self._keyring: Keyring | None = None
        self._limiter: RateLimiter | None = None

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

    def keyring(self) -> Keyring:
        with self._lock:
            if self._keyring is None:
                settings = self.settings
                self._keyring = Keyring(
                    settings.resolved_database_url,
                    bootstrap=settings.api_keys,
                    pepper=settings.key_pepper,
                )
            return self._keyring

    def limiter(self) -> RateLimiter:
        with self._lock:
            if self._limiter is None:
                settings = self.settings
                self._limiter = RateLimiter(
                    settings.resolved_rate_limit_url,
                    rate_per_s=settings.key_rate_per_s,
                    burst=settings.key_burst,
                )
            return self._limiter

    async def close_limiter(self) -> None:
        if self._limiter is not None:
            await self._limiter.close()

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


bearer = HTTPBearer(
    auto_error=False,
    description="an API key: one made by `memlane keys create`, or a MEMLANE_API_KEYS key",
)


async def require_key(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> KeyGrant:
    """The bearer token must be a live key (memlane.service.keys.keyring; any token while
    the server has no key at all), within its rate limit. The key's name becomes the
    actor of the changes the request makes and the access log's `key`."""
    runtime = runtime_of(request)
    keyring = runtime.keyring()
    given = credentials.credentials if credentials is not None else ""
    found = keyring.cached(given)
    grant = found if found is not False else await run_in_threadpool(keyring.verify, given)
    if not isinstance(grant, KeyGrant):
        raise ApiError(
            codes.UNAUTHORIZED,
            "send a valid API key: Authorization: Bearer <key> (an unknown, revoked or "
            "expired key is refused)",
        )
    request.state.key = grant
    request.state.actor = grant.actor
    limiter = runtime.limiter()
    wait = await limiter.wait_s(grant)
    if wait > 0:
        rate, burst = limit_of(grant, rate_per_s=limiter.rate_per_s, burst=limiter.burst)
        raise ApiError(
            codes.RATE_LIMITED,
            f"key {grant.name or '(unnamed)'} is over its rate limit ({rate:g} requests/s, "
            f"burst {burst}); retry in {wait:.2f} s",
            retry_after=round(wait, 3),
        )
    return grant


def reach(grant: KeyGrant, user_id: str) -> None:
    """Refuse (404) a user the key does not reach: the same answer whether the user
    exists or not, so a key learns nothing of other tenants' users. The id is checked as
    sent and as the store reads it (stripped)."""
    if not (grant.can_reach(user_id) and grant.can_reach(user_id.strip())):
        raise ApiError(codes.NOT_FOUND, f"no user {user_id!r} for this key")


class ScopeCheck:
    """A route's declared scope: the key must hold it (403 otherwise), and reach the
    path's `{user_id}` when it has one (404 otherwise, checked first)."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope

    async def __call__(
        self, request: Request, grant: Annotated[KeyGrant, Depends(require_key)]
    ) -> KeyGrant:
        user_id = request.path_params.get("user_id")
        if isinstance(user_id, str):
            reach(grant, user_id)
        if not grant.can(self.scope):
            held = ", ".join(sorted(grant.scopes)) or "none"
            raise ApiError(
                codes.FORBIDDEN,
                f"this needs a key with the {self.scope} scope; key "
                f"{grant.name or '(unnamed)'} has {held}",
            )
        return grant


class PublicRoute:
    """The declaration of a route any caller may use, with no key (health checks)."""

    async def __call__(self) -> None:
        return None


def needs(scope: Scope) -> Any:
    """`dependencies=[needs("write")]`: the route's declared scope (ScopeCheck)."""
    return Depends(ScopeCheck(scope))


PUBLIC: Any = Depends(PublicRoute())


def actor_of(request: Request) -> str:
    return str(getattr(request.state, "actor", "api"))


Lane = Annotated[Memlane, Depends(get_lane)]
Actor = Annotated[str, Depends(actor_of)]
Key = Annotated[KeyGrant, Depends(require_key)]
UserId = Annotated[str, PathParam(min_length=1, max_length=200)]
# Checked again by the facade (an agent id follows the user id's rule: no '/').
AgentId = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=200,
        description="read as this agent: the user's shared memories and this agent's; "
        "without one, the shared memories only",
    ),
]
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorOut} for status in (401, 403, 404, 409, 413, 422, 429, 500, 503)
}


def v1_router() -> APIRouter:
    """A router of /v1 routes: an API key required, the error answers documented."""
    return APIRouter(prefix="/v1", dependencies=[Depends(require_key)], responses=ERRORS)


def metrics_of(request: Request) -> ApiMetrics:
    metrics: ApiMetrics = request.app.state.metrics
    return metrics
