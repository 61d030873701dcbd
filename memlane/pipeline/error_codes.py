"""Every error code the HTTP API answers, `{"error": {"code", "message", …}}`: its usual
status and the extra fields its body carries.

One table for both sides: the server (memlane.api.errors) answers only codes from here,
and the client (memlane.client.errors) maps each to a typed exception; a test fails when
a code has no client exception or one cannot be built from its wire body. Plain data, no
dependency, so the client imports it without the server's libraries.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WireError:
    """One error code of the API. `status` is the one it is answered with (http_error
    alone carries whatever status the framework raised); `fields` are the body's fields
    beside code and message."""

    code: str
    status: int
    fields: tuple[str, ...] = ()


INVALID_TRANSCRIPT = WireError("invalid_transcript", 422, ("details",))
VALIDATION_ERROR = WireError("validation_error", 422, ("details",))
BUDGET_EXCEEDED = WireError("budget_exceeded", 422, ("budget", "required"))
MESSAGE_TOO_LARGE = WireError("message_too_large", 413, ("index",))
BODY_TOO_LARGE = WireError("body_too_large", 413)
UNAUTHORIZED = WireError("unauthorized", 401)
FORBIDDEN = WireError("forbidden", 403)  # the key lacks the route's scope
RATE_LIMITED = WireError("rate_limited", 429, ("retry_after",))
NOT_FOUND = WireError("not_found", 404)
METHOD_NOT_ALLOWED = WireError("method_not_allowed", 405)
CONFLICT = WireError("conflict", 409)
HTTP_ERROR = WireError("http_error", 400)  # any other status the framework raised
CONFIGURATION_ERROR = WireError("configuration_error", 500)
INTERNAL_ERROR = WireError("internal_error", 500)
NOT_READY = WireError("not_ready", 503, ("checks",))
DATABASE_UNAVAILABLE = WireError("database_unavailable", 503)
BROKER_UNAVAILABLE = WireError("broker_unavailable", 503, ("job_ids",))

API_ERRORS: tuple[WireError, ...] = (
    INVALID_TRANSCRIPT,
    VALIDATION_ERROR,
    BUDGET_EXCEEDED,
    MESSAGE_TOO_LARGE,
    BODY_TOO_LARGE,
    UNAUTHORIZED,
    FORBIDDEN,
    RATE_LIMITED,
    NOT_FOUND,
    METHOD_NOT_ALLOWED,
    CONFLICT,
    HTTP_ERROR,
    CONFIGURATION_ERROR,
    INTERNAL_ERROR,
    NOT_READY,
    DATABASE_UNAVAILABLE,
    BROKER_UNAVAILABLE,
)
