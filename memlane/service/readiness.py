"""Readiness checks: is the database reachable and its schema current, does the broker
answer? Each check returns "ok" or a short reason; details go to the log, not the caller
(the readiness endpoint is open)."""

from __future__ import annotations

import logging

from memlane.models import migrate

log = logging.getLogger("memlane.readiness")


def check_database(url: str) -> dict[str, str]:
    """{"database": …, "schema": …}; the schema is checked only when the database answers."""
    try:
        current = migrate.current_revision(url)
    except Exception as exc:  # any driver error means "not reachable"
        log.warning("readiness: database unreachable: %s", exc)
        return {"database": f"unreachable ({type(exc).__name__})"}
    head = migrate.head_revision()
    if current != head:
        return {"database": "ok", "schema": f"at {current}, needs {head}: run `memlane db upgrade`"}
    return {"database": "ok", "schema": "ok"}


def check_broker(url: str, *, timeout_s: float = 2.0) -> str:
    """Ping Redis (or, for another Celery transport, open a kombu connection) briefly."""
    try:
        if url.startswith(("redis://", "rediss://", "unix://")):
            import redis  # the fleet's extra; an embedded process has no broker to check

            client = redis.Redis.from_url(
                url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s
            )
            try:
                client.ping()
            finally:
                client.close()
        else:
            import kombu

            # kombu ships no types for Connection
            with kombu.Connection(url, connect_timeout=timeout_s) as connection:  # type: ignore[attr-defined,no-untyped-call]
                connection.ensure_connection(max_retries=1)
    except Exception as exc:
        log.warning("readiness: broker unreachable: %s", exc)
        return f"unreachable ({type(exc).__name__})"
    return "ok"
