"""Who calls the MCP server and which users they reach: over HTTP the caller's API key
(memlane.service.keys: stored keys and MEMLANE_API_KEYS), checked by `RequireKey` before
the SDK sees the request and left in the request's state for the tools; `user_for`
decides the user a tool acts on (the server's only, over stdio)."""

from __future__ import annotations

import math

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from memlane.service.keys.keyring import Keyring
from memlane.service.keys.rate_limit import RateLimiter
from memlane.service.keys.reach import KeyGrant
from memlane.service.keys.reach import Scope as KeyScope

KEY_STATE = "memlane_key"  # where RequireKey leaves the request's KeyGrant (scope["state"])


def grant_of(ctx: Context) -> KeyGrant | None:
    """The caller's key over HTTP (RequireKey put it in the request's state); None
    over stdio, which has no request."""
    try:
        request = ctx.request_context.request
    except ValueError:
        return None
    state = getattr(request, "scope", {}).get("state", {}) if request is not None else {}
    found = state.get(KEY_STATE)
    return found if isinstance(found, KeyGrant) else None


def user_for(ctx: Context, given: str | None, default: str | None, scope: KeyScope) -> str:
    """The user a tool acts on: `given`, else the server's; over stdio only the
    server's, over HTTP one the caller's key reaches (another is "not found", whether
    or not it exists) and only with the scope the tool needs."""
    user = given.strip() if given is not None and given.strip() else default
    if user is None:
        raise ToolError("name the user: give `user_id` (this server serves no default user)")
    grant = grant_of(ctx)
    if grant is None:
        if user != default:
            raise ToolError(f"no user {user!r} here: this server serves {default!r} only")
        return user
    if not (grant.can_reach(user) and (given is None or grant.can_reach(given))):
        raise ToolError(f"no user {user!r} for this key")
    if not grant.can(scope):
        raise ToolError(f"this tool needs a key with the {scope} scope; this key has not")
    return user


class RequireKey:
    """Refuses an HTTP request without a live key as its bearer token (401, the HTTP
    API's error shape), or over the key's rate limit (429 with Retry-After), and leaves
    the key's grant in the request's state for the tools (`grant_of`). With no key
    anywhere every request passes (the keyring's rule)."""

    def __init__(self, app: ASGIApp, keyring: Keyring, limiter: RateLimiter | None) -> None:
        self.app, self.keyring, self.limiter = app, keyring, limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
        scheme, _, token = header.partition(" ")
        token = token.strip() if scheme.lower() == "bearer" else ""
        found = self.keyring.cached(token)
        grant = found if found is not False else await run_in_threadpool(self.keyring.verify, token)
        if not isinstance(grant, KeyGrant):
            message = "send a valid API key: Authorization: Bearer <key>"
            await _error(401, "unauthorized", message, {"www-authenticate": "Bearer"})(
                scope, receive, send
            )
            return
        wait = await self.limiter.wait_s(grant) if self.limiter is not None else 0.0
        if wait > 0:
            headers = {"retry-after": str(max(1, math.ceil(wait)))}
            message = f"key {grant.name} is over its rate limit; retry in {wait:.2f} s"
            await _error(429, "rate_limited", message, headers, retry_after=round(wait, 3))(
                scope, receive, send
            )
            return
        scope.setdefault("state", {})[KEY_STATE] = grant
        await self.app(scope, receive, send)


def _error(
    status: int, code: str, message: str, headers: dict[str, str], **extra: object
) -> JSONResponse:
    body = {"error": {"code": code, "message": message, **extra}}
    return JSONResponse(body, status_code=status, headers=headers)
