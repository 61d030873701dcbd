"""How every /ui route runs: the session it needs (a redirect to sign in, or 401 for a
POST), the CSRF token a POST must carry (403 without), and memlane's errors shown as a
page with the status the API would give, not as JSON."""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import Depends, Form, Request, Response
from fastapi.responses import RedirectResponse
from fastapi.routing import APIRoute
from pydantic import SecretStr

from memlane.api.deps import runtime_of
from memlane.api.ui import session as sessions
from memlane.api.ui.render import page
from memlane.pipeline.errors import (
    BrokerUnavailableError,
    BudgetError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
)

audit = logging.getLogger("memlane.ui")


class SignInNeeded(Exception):
    """No valid session."""


class CsrfRefused(Exception):
    """A POST without its session's CSRF token."""


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
            except tuple(kind for kind, _, _ in _STATUS) as exc:
                status, title = next((s, t) for k, s, t in _STATUS if isinstance(exc, k))
                return page(request, "error.html", status, title=title, message=str(exc))

        return guarded


def api_keys(request: Request) -> list[SecretStr]:
    return list(runtime_of(request).settings.api_keys)


def only_stored_keys(request: Request) -> bool:
    """No MEMLANE_API_KEYS, but keys made with `memlane keys create`: the API is closed,
    yet the inspector's sessions know only MEMLANE_API_KEYS (a stored key's scopes and
    users do not reach its pages yet), so it signs no one in rather than everyone."""
    runtime = runtime_of(request)
    return not runtime.settings.api_keys and runtime.keyring().closed()


def current_session(request: Request) -> sessions.Session:
    """The signed-in session (SignInNeeded without one); the page's CSRF token set."""
    keys = api_keys(request)
    found = sessions.read(request.cookies.get(sessions.COOKIE), keys)
    if found is None or only_stored_keys(request):
        raise SignInNeeded
    request.state.ui_session = found
    request.state.ui_csrf = sessions.csrf_token(found, keys)
    return found


def posted_session(
    request: Request,
    session: Annotated[sessions.Session, Depends(current_session)],
    csrf: Annotated[str, Form(max_length=200)] = "",
) -> sessions.Session:
    """A POST's session: its form must carry the session's CSRF token."""
    if not sessions.csrf_ok(session, csrf, api_keys(request)):
        raise CsrfRefused
    return session


Viewer = Annotated[sessions.Session, Depends(current_session)]
Poster = Annotated[sessions.Session, Depends(posted_session)]


def back_to(target: str, done: str) -> RedirectResponse:
    """After a POST, the page to show (303: the browser GETs it), saying what was done."""
    glue = "&" if "?" in target else "?"
    return RedirectResponse(f"{target}{glue}done={quote(done)}", status_code=303)


def safe_next(target: str | None) -> str:
    """Where to go after signing in: a path of the inspector only (no open redirect)."""
    if target and target.startswith("/ui") and not target.startswith("//") and "\\" not in target:
        return target
    return "/ui/users"
