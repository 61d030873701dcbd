"""The typed errors of `memlane.client`, read from the API's error shape
`{"error": {"code", "message", …}}`.

Each is also the facade's error of the same meaning (a client NotFound is a
NotFoundError, a BudgetExceeded a BudgetError), so code written against `Memlane` catches
the same exceptions when it moves to the HTTP client.
"""

from __future__ import annotations

from typing import Any

import httpx

from memlane.pipeline.errors import (
    BudgetError,
    ConfigurationError,
    MemlaneError,
    NotFoundError,
    TranscriptError,
)


class ApiError(MemlaneError):
    """The API answered with an error; `status`, `code` (stable) and `message` say which,
    `details` holds any extra fields of the error body."""

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any]) -> None:
        super().__init__(f"{code} ({status}): {message}")
        self.status, self.code, self.message, self.details = status, code, message, details


class InvalidTranscript(ApiError, TranscriptError):
    """422 invalid_transcript: the transcript was rejected whole; nothing was written."""


class InvalidRequest(ApiError):
    """422 validation_error: a parameter is out of range or malformed."""


class PayloadTooLarge(ApiError, TranscriptError):
    """413 message_too_large / body_too_large: send shorter messages or fewer per request."""


class BudgetExceeded(ApiError, BudgetError):
    """422 budget_exceeded: the must-have items do not fit the budget."""

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any]) -> None:
        ApiError.__init__(self, status, code, message, details)
        self.budget = int(details.get("budget", 0))
        self.required = int(details.get("required", 0))


class Unauthorized(ApiError, ConfigurationError):
    """401: no key or a wrong one; set MEMLANE_CLIENT_KEY (or pass api_key=)."""


class NotFound(ApiError, NotFoundError):
    """404: no such memory, job or pack (for this user)."""


class Conflict(ApiError):
    """409: the request contradicts the stored state (a job not failed, …)."""


class ServerError(ApiError):
    """500: configuration_error or internal_error on the server; see its logs."""


class Unavailable(ApiError):
    """503 (not_ready, database_unavailable, broker_unavailable), still after the client's
    retries. broker_unavailable: the transcript and its jobs are stored and stay queued
    (`details["job_ids"]`); the server's sweep publishes them."""


class ConnectionFailed(MemlaneError):
    """The API could not be reached at all (refused, timed out, DNS)."""

    code = "connection_failed"


_BY_CODE: dict[str, type[ApiError]] = {
    "invalid_transcript": InvalidTranscript,
    "validation_error": InvalidRequest,
    "message_too_large": PayloadTooLarge,
    "body_too_large": PayloadTooLarge,
    "budget_exceeded": BudgetExceeded,
    "unauthorized": Unauthorized,
    "not_found": NotFound,
    "conflict": Conflict,
    "configuration_error": ServerError,
    "internal_error": ServerError,
    "not_ready": Unavailable,
    "broker_unavailable": Unavailable,
    "database_unavailable": Unavailable,
}
_BY_STATUS: dict[int, type[ApiError]] = {
    401: Unauthorized,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    422: InvalidRequest,
    503: Unavailable,
}


def error_from(response: httpx.Response) -> ApiError:
    """The typed error of an error response (any status >= 400)."""
    try:
        body = response.json()
        error = dict(body["error"])
        code, message = str(error.pop("code")), str(error.pop("message"))
    except (ValueError, KeyError, TypeError):
        code, message, error = f"http_{response.status_code}", response.text[:500], {}
    kind = _BY_CODE.get(code) or _BY_STATUS.get(response.status_code)
    if kind is None:
        kind = ServerError if response.status_code >= 500 else ApiError
    return kind(response.status_code, code, message, error)
