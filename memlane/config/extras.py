"""Which optional part of the distribution a part of memlane needs, and a clear error when
it is missing.

`pip install memlane` is the client alone (httpx and pydantic), so a chat app that calls a
memlane server installs a few megabytes. Everything else comes with an extra (the names
are the `[project.optional-dependencies]` of pyproject.toml):

- `embedded`: the facade on SQLite, the offline extractor, the MiniLM embedder, the CLI;
- `postgres`: the PostgreSQL driver;
- `fleet`: the Celery workers and the LLM adapter (litellm);
- `server`: the HTTP API (FastAPI, uvicorn, Prometheus metrics) and its inspector pages;
- `mcp`: the MCP server; `flower`: Flower; `all`: everything.

A part checks its third-party modules when it is imported, so a missing extra fails at the
import with the line to run, not later with a bare `No module named 'sqlalchemy'`. This
module imports nothing beyond the standard library: the client may import it.
"""

from __future__ import annotations

import importlib.util

DISTRIBUTION = "memlane"


class MissingExtraError(ImportError):
    """A part of memlane was imported without the extra that installs what it uses."""

    def __init__(self, part: str, extra: str, missing: list[str]) -> None:
        self.part = part
        self.extra = extra
        self.missing = missing
        super().__init__(
            f"{part} needs the '{extra}' extra (missing: {', '.join(missing)}): "
            f'pip install "{DISTRIBUTION}[{extra}]"',
            name=missing[0],
        )


def missing_modules(*modules: str) -> list[str]:
    """The top-level modules of `modules` that cannot be imported here."""
    return [module for module in modules if importlib.util.find_spec(module) is None]


def require(part: str, extra: str, *modules: str) -> None:
    """Raise MissingExtraError naming `extra` when any of `modules` is not installed."""
    missing = missing_modules(*modules)
    if missing:
        raise MissingExtraError(part, extra, missing)


# What each extra adds that its part imports at the top; pyproject.toml lists the same
# distributions (tests/unit/test_extras.py holds the two together).
EMBEDDED_MODULES = (
    "sqlalchemy",
    "alembic",
    "pgvector",
    "numpy",
    "tiktoken",
    "regex",
    "pydantic_settings",
    "snowballstemmer",
    "orjson",
)
CLI_MODULES = ("typer", "rich")
FLEET_MODULES = ("celery", "redis")
SERVER_MODULES = (
    "fastapi",
    "fastapi_offline",
    "uvicorn",
    "prometheus_client",
    "jinja2",  # the inspector (memlane.api.ui)
    "python_multipart",  # its forms
)
