"""Sign in and out: an API key (a stored key, or one of MEMLANE_API_KEYS: whatever the
API takes, checked by the same keyring) for a session cookie. The
sign-in form carries a token equal to a cookie of its own (double submit): another site
cannot sign a browser in under its key."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import RedirectResponse

from memlane.api.deps import runtime_of
from memlane.api.ui import session as sessions
from memlane.api.ui.render import page
from memlane.api.ui.routing import Poster, UiRoute, audit, safe_next, signer
from memlane.service.keys.reach import OPEN

router = APIRouter(prefix="/ui", route_class=UiRoute, include_in_schema=False)


def _cookie(response: Response, request: Request, name: str, value: str, hours: int) -> None:
    response.set_cookie(
        name,
        value,
        max_age=hours * 3600,
        path=sessions.PATH,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


@router.get("/signin")
def signin_form(request: Request, next: str = "", failed: bool = False) -> Response:
    token = request.cookies.get(sessions.SIGNIN_COOKIE) or secrets.token_urlsafe(24)
    status = 401 if failed else 200
    response = page(
        request, "signin.html", status, signin_token=token, next=safe_next(next), failed=failed
    )
    _cookie(response, request, sessions.SIGNIN_COOKIE, token, 1)
    return response


@router.post("/signin")
def signin(
    request: Request,
    key: Annotated[str, Form(max_length=500)] = "",
    csrf: Annotated[str, Form(max_length=200)] = "",
    next: Annotated[str, Form(max_length=500)] = "",
) -> Response:
    expected = request.cookies.get(sessions.SIGNIN_COOKIE, "")
    if not expected or not sessions.same(csrf, expected):
        return page(
            request,
            "error.html",
            403,
            title="Refused",
            message="The sign-in form's token is missing or wrong: reload the page.",
        )
    grant = runtime_of(request).keyring().verify(key)
    if grant is None:
        audit.warning("ui sign-in refused: not a valid key")
        return RedirectResponse(f"/ui/signin?failed=1&next={safe_next(next)}", status_code=303)
    fingerprint = sessions.key_print(key) if grant is not OPEN and grant.key_id is None else ""
    cookie = sessions.issue(
        grant.actor, key_id=grant.key_id, fingerprint=fingerprint, signer=signer(request)
    )
    response = RedirectResponse(safe_next(next), status_code=303)
    _cookie(response, request, sessions.COOKIE, cookie, sessions.SESSION_HOURS)
    response.delete_cookie(
        sessions.SIGNIN_COOKIE, path=sessions.PATH, httponly=True, samesite="strict"
    )
    audit.info("ui sign-in: %s", grant.actor)
    return response


@router.post("/signout")
def signout(viewer: Poster) -> Response:
    response = RedirectResponse("/ui/signin", status_code=303)
    response.delete_cookie(sessions.COOKIE, path=sessions.PATH, httponly=True, samesite="strict")
    audit.info("ui sign-out: %s", viewer.actor)
    return response
