"""Every route of the HTTP API declares what a key needs to call it (`needs(scope)` or
`PUBLIC`, memlane.api.deps), so a new route cannot ship open: this test enumerates the
app's routes and fails for any that declares nothing. Also the reach rule itself."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, iter_route_contexts

from memlane.api.app import create_app
from memlane.api.deps import PublicRoute, ScopeCheck
from memlane.api.ui.routing import current_session
from memlane.pipeline.errors import InvalidInputError
from memlane.service.keys.reach import KeyGrant, parse_patterns, parse_scopes

# fastapi-offline's documentation pages: the API's description, no user's data
DOC_PAGES = {"/docs", "/docs/oauth2-redirect", "/redoc"}
# the inspector's sign-in form: what a browser without a session is sent to
UI_SIGN_IN = {"/ui/signin"}


def api_routes(app: FastAPI) -> Iterator[APIRoute]:
    for context in iter_route_contexts(app.routes):
        if isinstance(context.original_route, APIRoute):
            yield context.original_route


def declared(dependant: Dependant) -> list[Any]:
    """The scope declarations among the route's dependencies, however deep: a scope, the
    public mark, or the inspector's signed-in session (memlane.api.ui.routing: its pages
    ask access.may_see_user for every user)."""
    found = [
        d.call
        for d in dependant.dependencies
        if isinstance(d.call, ScopeCheck | PublicRoute) or d.call is current_session
    ]
    return found + [x for d in dependant.dependencies for x in declared(d)]


def test_every_route_declares_a_scope() -> None:
    undeclared, scopes = [], {}
    for route in api_routes(create_app()):
        if route.path in DOC_PAGES | UI_SIGN_IN and not route.include_in_schema:
            continue
        found = declared(route.dependant)
        if not found:
            undeclared.append(f"{sorted(route.methods)} {route.path}")
        for method in route.methods:
            scopes[(method, route.path)] = {
                "session" if d is current_session else getattr(d, "scope", "public") for d in found
            }
    assert not undeclared, f"routes without needs(scope) or PUBLIC: {undeclared}"
    assert all(len(s) == 1 for s in scopes.values()), "one declaration per route"
    # what the rule says, spot-checked: reads read, writes write, operations admin
    assert scopes[("GET", "/v1/users/{user_id}/memories")] == {"read"}
    assert scopes[("POST", "/v1/context")] == {"read"}
    assert scopes[("DELETE", "/v1/users/{user_id}")] == {"write"}
    assert scopes[("POST", "/v1/transcripts")] == {"write"}
    for admin in (
        ("POST", "/v1/keys"),
        ("POST", "/v1/jobs/sweep"),
        ("GET", "/v1/status"),
        ("GET", "/metrics"),
    ):
        assert scopes[admin] == {"admin"}, admin
    assert scopes[("GET", "/healthz")] == {"public"}
    # every GET but health's needs read at least, every other method write at least
    for (method, path), held in scopes.items():
        writes = method in ("POST", "PUT", "PATCH", "DELETE") and held != {"session"}
        if writes and path not in ("/v1/context", "/v1/search"):
            assert held & {"write", "admin"}, (method, path)


def test_patterns_reach_exact_ids_and_prefixes() -> None:
    key = KeyGrant(name="acme", users=("acme:*", "bob"))
    assert key.can_reach("acme:1") and key.can_reach("acme:") and key.can_reach("bob")
    assert not key.can_reach("acme") and not key.can_reach("bobby") and not key.can_reach("x")
    assert KeyGrant(name="all").can_reach("anyone")
    assert key.actor == "api:acme"


def test_scopes_nest() -> None:
    reader = KeyGrant(name="r", scopes=frozenset({"read"}))
    admin = KeyGrant(name="a", scopes=frozenset({"admin"}))
    assert reader.can("read") and not reader.can("write") and not reader.can("admin")
    assert admin.can("read") and admin.can("write") and admin.can("admin")


@pytest.mark.parametrize("bad", ["*", "a*b", "", " ", "x" * 201])
def test_bad_patterns_are_refused(bad: str) -> None:
    with pytest.raises(InvalidInputError):
        parse_patterns([bad])


def test_scopes_parse_from_commas_and_refuse_unknown_ones() -> None:
    assert parse_scopes(["read,write"]) == {"read", "write"}
    with pytest.raises(InvalidInputError, match="unknown scope owner"):
        parse_scopes(["read,owner"])
