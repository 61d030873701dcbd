"""The typed errors of `memlane.client`, read from the API's error shape
`{"error": {"code", "message", …}}`.

Each is also the facade's error of the same meaning (a client NotFound is a
NotFoundError, a BudgetExceeded a BudgetError), so code written against `Memlane` catches
the same exceptions when it moves to the HTTP client.
"""

from __future__ import annotations

from typing import Any

import httpx

from memlane.pipeline import error_codes as codes
from memlane.pipeline.error_codes import WireError
from memlane.pipeline.errors import (
    BrokerUnavailableError,
    BudgetError,
    ConfigurationError,
    ConflictError,
    InvalidInputError,
    MemlaneError,
    NotFoundError,
    TranscriptError,
)


class ApiError(MemlaneError):
    """The API answered with an error; `status`, `code` (stable) and `message` say which,
    `details` holds any extra fields of the error body."""

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any]) -> None:
        # Not super().__init__: the facade errors mixed in below take other arguments
        # (BudgetError wants budget= and required=), and the wire body is all there is.
        Exception.__init__(self, f"{code} ({status}): {message}")
        self.status, self.code, self.message, self.details = status, code, message, details

    def __reduce__(self) -> tuple[Any, ...]:
        # rebuilt from the wire values, so it pickles (a process pool, a task queue)
        return (type(self), (self.status, self.code, self.message, self.details))


class InvalidTranscript(ApiError, TranscriptError):
    """422 invalid_transcript: the transcript was rejected whole; nothing was written."""


class InvalidRequest(ApiError, InvalidInputError):
    """422 validation_error: a parameter is out of range or malformed (`details` names
    each field at fault)."""


class PayloadTooLarge(ApiError, TranscriptError):
    """413 message_too_large / body_too_large: send shorter messages or fewer per request."""


class BudgetExceeded(ApiError, BudgetError):
    """422 budget_exceeded: the must-have items do not fit the budget; `budget` and
    `required` say by how much (raise budget_tokens, or unpin)."""

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any]) -> None:
        super().__init__(status, code, message, details)
        self.budget = _int(details.get("budget"))
        self.required = _int(details.get("required"))


class Unauthorized(ApiError, ConfigurationError):
    """401: no key or a wrong one; set MEMLANE_CLIENT_KEY (or pass api_key=)."""


class Forbidden(ApiError, ConfigurationError):
    """403 forbidden: the key lacks the scope the call needs (read, write or admin); use
    a key made with it (`memlane keys create --scopes`)."""


class RateLimited(ApiError):
    """429 rate_limited: the key is over its rate; `retry_after` says how many seconds
    until a call would pass (also the Retry-After header)."""

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any]) -> None:
        super().__init__(status, code, message, details)
        found = details.get("retry_after")
        self.retry_after = float(found) if isinstance(found, int | float) else 1.0


class NotFound(ApiError, NotFoundError):
    """404: no such memory, job or pack (for this user)."""


class MethodNotAllowed(ApiError):
    """405: the server has the path but not this method: it is likely an older memlane
    than the client; upgrade the server."""


class Conflict(ApiError, ConflictError):
    """409: the request contradicts the stored state (a job not failed, …)."""


class HttpError(ApiError):
    """Any other HTTP error the server's framework answered; `status` says which."""


class ServerError(ApiError):
    """500: configuration_error or internal_error on the server; see its logs."""


class Unavailable(ApiError):
    """503 (not_ready, database_unavailable, broker_unavailable), still after the client's
    retries; retry later."""


class BrokerUnavailable(Unavailable, BrokerUnavailableError):
    """503 broker_unavailable: the transcript and its jobs are stored and stay queued
    (`job_ids`); the server's sweep publishes them, re-sending stores nothing twice."""

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any]) -> None:
        super().__init__(status, code, message, details)
        found = details.get("job_ids")
        self.job_ids = [str(job) for job in found] if isinstance(found, list) else []


class ConnectionFailed(MemlaneError):
    """The API could not be reached at all (refused, timed out, DNS)."""

    code = "connection_failed"


# The one table: each code the API answers (memlane.pipeline.error_codes) and its
# exception. tests/unit/test_client_errors.py fails when a code is missing here.
ERRORS: dict[WireError, type[ApiError]] = {
    codes.INVALID_TRANSCRIPT: InvalidTranscript,
    codes.VALIDATION_ERROR: InvalidRequest,
    codes.BUDGET_EXCEEDED: BudgetExceeded,
    codes.MESSAGE_TOO_LARGE: PayloadTooLarge,
    codes.BODY_TOO_LARGE: PayloadTooLarge,
    codes.UNAUTHORIZED: Unauthorized,
    codes.FORBIDDEN: Forbidden,
    codes.RATE_LIMITED: RateLimited,
    codes.NOT_FOUND: NotFound,
    codes.METHOD_NOT_ALLOWED: MethodNotAllowed,
    codes.CONFLICT: Conflict,
    codes.HTTP_ERROR: HttpError,
    codes.CONFIGURATION_ERROR: ServerError,
    codes.INTERNAL_ERROR: ServerError,
    codes.NOT_READY: Unavailable,
    codes.DATABASE_UNAVAILABLE: Unavailable,
    codes.BROKER_UNAVAILABLE: BrokerUnavailable,
}
_BY_CODE = {kind.code: error for kind, error in ERRORS.items()}
# A code this client does not know (a newer server): read by its status.
_BY_STATUS: dict[int, type[ApiError]] = {
    401: Unauthorized,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    413: PayloadTooLarge,
    422: InvalidRequest,
    503: Unavailable,
}


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _read_body(response: httpx.Response) -> tuple[str, str, dict[str, Any]]:
    """The code, message and other fields of an error body; a body not of the API's shape
    (a proxy's page) is `http_<status>` with its text."""
    try:
        error = response.json()["error"]
    except (ValueError, KeyError, TypeError):
        error = None
    if not isinstance(error, dict) or not isinstance(error.get("code"), str):
        return f"http_{response.status_code}", response.text[:500], {}
    details = {str(k): v for k, v in error.items() if k not in {"code", "message"}}
    return error["code"], str(error.get("message", "")), details


def error_from(response: httpx.Response) -> ApiError:
    """The typed error of an error response (any status >= 400)."""
    code, message, details = _read_body(response)
    kind = _BY_CODE.get(code) or _BY_STATUS.get(response.status_code)
    if kind is None:
        kind = ServerError if response.status_code >= 500 else ApiError
    return kind(response.status_code, code, message, details)
