"""What a long-running process (`memlane serve`, the HTTP API, a Celery worker, beat,
`memlane mcp`) checks and says as it starts: it refuses a database it would make up (the
SQLite file in the working folder, where other processes or clients cannot be meant to
share it) and a server open to the network without keys, unless the user says so; and it
logs one line naming what it runs on, passwords masked.

Each front door calls these with its own settings; the unknown-variable warning lives
with the settings (memlane.config.settings.load_settings), which every process reads.
"""

from __future__ import annotations

import ipaddress
import logging
import sys
from collections.abc import Callable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from memlane.config.settings import Settings, SettingsError, no_implicit_database

log = logging.getLogger("memlane.startup")

MASK = "***"
_SECRET_PARAMETERS = ("password", "pass", "passwd", "secret", "token")


def require_database(settings: Settings, who: str) -> None:
    """Refuse to start `who` (a server, a worker, beat) on the implicit SQLite file:
    MEMLANE_DATABASE_URL must name the database."""
    if settings.database_url is None:
        raise no_implicit_database(who)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name: it may resolve to anything
        return False


def require_auth(settings: Settings, host: str, who: str, *, allowed: bool) -> None:
    """Refuse to serve on a non-loopback `host` without API keys unless the user allowed it
    (`allowed`: --allow-unauthenticated, or MEMLANE_ALLOW_UNAUTHENTICATED)."""
    if is_loopback(host) or settings.api_keys or allowed:
        return
    raise SettingsError(
        f"MEMLANE_API_KEYS is not set: {who} would listen on {host} with no key, and anyone "
        "who reaches the port could read and change every user's memories; set "
        "MEMLANE_API_KEYS=<key>[,<key>…], or listen on 127.0.0.1, or pass "
        "--allow-unauthenticated (MEMLANE_ALLOW_UNAUTHENTICATED=true) when something in "
        "front of it checks who calls"
    )


def masked(url: str) -> str:
    """`url` with its password (and password-like query parameters) replaced by ***; a
    sentinel broker's `;`-separated URLs each so."""
    return ";".join(_masked_one(part) for part in url.split(";"))


def _masked_one(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        if ":" in userinfo:
            netloc = f"{userinfo.split(':', 1)[0]}:{MASK}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(key.lower() in _SECRET_PARAMETERS for key, _ in pairs):
            pairs = [(k, MASK if k.lower() in _SECRET_PARAMETERS else v) for k, v in pairs]
            query = urlencode(pairs, safe="*")
    if (netloc, query) == (parts.netloc, parts.query):
        return url  # as written: urlunsplit would drop sqlite:///'s empty host
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def start_line(settings: Settings, process: str) -> str:
    """One line: what `process` runs on. The database as resolved (the embedded default's
    file included), each URL with its password masked."""
    database = masked(settings.resolved_database_url)
    broker = masked(settings.broker_url) if settings.broker_url else "none (jobs run in-process)"
    extractor = settings.llm_model or "offline (rule-based)"
    keys = len(settings.api_keys)
    auth = f"on ({keys} key{'s' if keys > 1 else ''})" if keys else "off"
    if not keys and settings.allow_unauthenticated:
        auth += " (allowed by MEMLANE_ALLOW_UNAUTHENTICATED)"
    working_set = f"{settings.working_set_mb:g} MB" if settings.working_set_mb else "off (0 MB)"
    return (
        f"memlane {process}: database {database}; broker {broker}; embedder "
        f"{settings.embedding_model}; extractor {extractor}; auth {auth}; working set "
        f"{working_set}"
    )


def log_start(settings: Settings, process: str) -> None:
    log.info("%s", start_line(settings, process))


def exit_unless(check: Callable[[], object]) -> None:
    """Run `check` in a process started by another program (`celery worker`, `celery
    beat`), which prints a traceback for an exception: a refusal is one line `error: …`
    on stderr and exit status 2, as the CLI's."""
    try:
        check()
    except SettingsError as exc:
        # the stream Celery started with: it swaps sys.stderr for a logger once logging is set
        print(f"error: {exc}", file=sys.__stderr__ or sys.stderr, flush=True)
        raise SystemExit(2) from None
