"""How every /ui route runs: the session it needs (a redirect to sign in, or 401 for a
POST) and its key's grant, checked again on each request; the CSRF token a POST must
carry (403 without); the `write` scope an action needs (403, saying so); and memlane's
errors shown as a page with the status the API would give, not as JSON."""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from dataclasses import replace
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import Depends, Form, Request, Response
from fastapi.responses import RedirectResponse
from fastapi.routing import APIRoute

from memlane.api.deps import runtime_of
from memlane.api.ui import session as sessions
from memlane.api.ui.access import require_user
from memlane.api.ui.render import page
from memlane.pipeline.errors import (
    BrokerUnavailableError,
    BudgetError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
)
from memlane.service.keys.keyring import Keyring
from memlane.service.keys.reach import OPEN, KeyGrant, Scope

audit = logging.getLogger("memlane.ui")


class SignInNeeded(Exception):
    """No valid session."""


class CsrfRefused(Exception):
    """A POST without its session's CSRF token."""


class ScopeRefused(Exception):
    """An action the session's key has not the scope for (its text says which)."""


_STATUS: tuple[tuple[type[Exception], int, str], ...] = (
    (NotFoundError, 404, "Not found"),
    (InvalidInputError, 422, "Not valid"),
    (BudgetError, 422, "Over budget"),
    (ConflictError, 409, "Conflict"),
    (BrokerUnavailableError, 503, "Broker unavailable"),
)


class UiRoute(APIRoute):
    """An /ui route: errors become pages (the API's handlers answer JSON)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            try:
                return await handler(request)
            except SignInNeeded:
                if request.method == "GET":
                    target = quote(str(request.url.path), safe="/")
                    return RedirectResponse(f"/ui/signin?next={target}", status_code=303)
                return page(
                    request,
                    "error.html",
                    401,
                    title="Sign in first",
                    message="This action needs a session: sign in with an API key.",
                )
            except CsrfRefused:
                return page(
                    request,
                    "error.html",
                    403,
                    title="Refused",
                    message="The form's CSRF token is missing or wrong: reload the "
                    "page and try again.",
                )
            except ScopeRefused as exc:
                return page(request, "error.html", 403, title="Not allowed", message=str(exc))
            except tuple(kind for kind, _, _ in _STATUS) as exc:
                status, title = next((s, t) for k, s, t in _STATUS if isinstance(exc, k))
                return page(request, "error.html", status, title=title, message=str(exc))

        return guarded


def signer(request: Request) -> sessions.Secrets:
    settings = runtime_of(request).settings
    return sessions.Secrets(settings.api_keys, settings.key_pepper)


def grant_now(keyring: Keyring, session: sessions.Session) -> KeyGrant | None:
    """What the session's key may do now, or None when it may no longer sign in: a
    stored key revoked, expired or gone (the keyring's cache: within CACHE_S); an open
    server's session once the server has a key. A MEMLANE_API_KEYS key still
    configured (sessions.read checked it) reaches every user with every scope."""
    if session.key_id is not None:
        return keyring.live_grant(session.key_id)
    if session.key_print:
        return KeyGrant(name=session.actor.removeprefix("api").removeprefix(":"))
    return OPEN if not keyring.closed() else None


def current_session(request: Request) -> sessions.Session:
    """The signed-in session with its key's grant now (SignInNeeded without one); the
    page's CSRF token set."""
    keys = signer(request)
    found = sessions.read(request.cookies.get(sessions.COOKIE), keys)
    grant = grant_now(runtime_of(request).keyring(), found) if found is not None else None
    if found is None or grant is None:
        raise SignInNeeded
    found = replace(found, grant=grant)
    request.state.ui_session = found
    request.state.ui_csrf = sessions.csrf_token(found, keys)
    return found


def posted_session(
    request: Request,
    session: Annotated[sessions.Session, Depends(current_session)],
    csrf: Annotated[str, Form(max_length=200)] = "",
) -> sessions.Session:
    """A POST's session: its form must carry the session's CSRF token."""
    if not sessions.csrf_ok(session, csrf, signer(request)):
        raise CsrfRefused
    return session


def acting_session(
    request: Request, session: Annotated[sessions.Session, Depends(posted_session)]
) -> sessions.Session:
    """An action's session: the user in the path within the key's reach (404 first, as
    the API answers), and the key holding the `write` scope."""
    user_id = request.path_params.get("user_id")
    if isinstance(user_id, str):
        require_user(session, user_id)
    require_scope(session, "write")
    return session


def require_scope(session: sessions.Session, scope: Scope) -> None:
    """ScopeRefused unless the session's key holds `scope`."""
    grant = session.grant
    if grant is None or not grant.can(scope):
        held = ", ".join(sorted(grant.scopes)) if grant is not None else "none"
        raise ScopeRefused(
            f"this action needs a key with the {scope} scope; key "
            f"{grant.name if grant is not None and grant.name else '(unnamed)'} has {held}. "
            "Sign in with such a key, or use the pages to read."
        )


Viewer = Annotated[sessions.Session, Depends(current_session)]
Poster = Annotated[sessions.Session, Depends(posted_session)]
Editor = Annotated[sessions.Session, Depends(acting_session)]


def back_to(target: str, done: str) -> RedirectResponse:
    """After a POST, the page to show (303: the browser GETs it), saying what was done."""
    glue = "&" if "?" in target else "?"
    return RedirectResponse(f"{target}{glue}done={quote(done)}", status_code=303)


def safe_next(target: str | None) -> str:
    """Where to go after signing in: a path of the inspector only (no open redirect)."""
    if target and target.startswith("/ui") and not target.startswith("//") and "\\" not in target:
        return target
    return "/ui/users"
