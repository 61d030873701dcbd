"""The inspector's templates (memlane/api/ui/templates, Jinja2, autoescaped) and what
every page gets: the session, its CSRF token, the current path, the flash message."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

HERE = Path(__file__).parent
STATIC = HERE / "static"


def _when(value: datetime | str | None) -> str:
    if value is None:
        return "—"
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.strftime("%Y-%m-%d %H:%M:%S UTC")


def _number(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


ENV = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=select_autoescape(["html"]),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
ENV.filters["when"] = _when
ENV.filters["number"] = _number
ENV.filters["part"] = lambda value: quote(str(value), safe="")  # one path segment


def page(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """A rendered page. Pages are never cached (they show private data)."""
    values: dict[str, Any] = {
        "session": getattr(request.state, "ui_session", None),
        "csrf": getattr(request.state, "ui_csrf", ""),
        "path": request.url.path,
        "flash": request.query_params.get("done", ""),
    }
    values.update(context)
    html = ENV.get_template(template).render(values)
    return HTMLResponse(
        html,
        status_code=status_code,
        headers={
            "Cache-Control": "no-store",
            "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; "
            "form-action 'self'; base-uri 'none'",
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "same-origin",
        },
    )
