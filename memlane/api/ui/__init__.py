"""The inspector: web pages under /ui where a team sees what memlane knows about a user
and why a context held what it held (docs/inspector.md). Rendered on the server (Jinja2,
memlane/api/ui/templates), a little plain JS, every asset served from
memlane/api/ui/static (no CDN: the pages work offline). Behind the API's keys: a key
signs in for a session cookie (memlane.api.ui.session); `may_see_user`
(memlane.api.ui.access) is the one check of whom a session sees. The use cases are
memlane.service.inspector's and the facade's."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from memlane.api.ui import actions, pages, signin
from memlane.api.ui.render import STATIC


def install(app: FastAPI) -> None:
    """Add the inspector's pages, actions and assets to `app` (none in the OpenAPI
    document: they are pages, not API)."""
    for routes in (signin, pages, actions):
        app.include_router(routes.router)
    app.mount("/ui/static", StaticFiles(directory=STATIC), name="ui-static")
