"""The HTTP API's one error shape, `{"error": {"code": "<stable code>", "message": "..."}}`:
the exception handlers that produce it and the middleware that refuses oversized bodies.

Codes come only from memlane.pipeline.error_codes (the client maps the same table):
invalid_transcript / validation_error (422), message_too_large and body_too_large
(413), unauthorized (401), forbidden (403: the key lacks the scope), rate_limited
(429, with retry_after and the Retry-After header), not_found (404), method_not_allowed
(405), budget_exceeded (422, with budget and required), conflict (409: any other MemlaneError),
broker_unavailable (503, with the job ids stored and left queued), database_unavailable
and not_ready (503), configuration_error and internal_error (500), http_error (any other
status the framework raised).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Collection, Coroutine, Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy.exc import OperationalError
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memlane.pipeline import error_codes as codes
from memlane.pipeline.error_codes import WireError
from memlane.pipeline.errors import (
    BrokerUnavailableError,
    BudgetError,
    ConfigurationError,
    InvalidInputError,
    MemlaneError,
    NotFoundError,
    TranscriptError,
)

# What facade errors become over HTTP; any other MemlaneError is a state conflict (409).
_STATUS_OF: tuple[tuple[type[MemlaneError], WireError], ...] = (
    (TranscriptError, codes.INVALID_TRANSCRIPT),
    (NotFoundError, codes.NOT_FOUND),
    (BudgetError, codes.BUDGET_EXCEEDED),
    (InvalidInputError, codes.VALIDATION_ERROR),
    (BrokerUnavailableError, codes.BROKER_UNAVAILABLE),
    (ConfigurationError, codes.CONFIGURATION_ERROR),
)
_HTTP_CODES = {
    401: codes.UNAUTHORIZED,
    403: codes.FORBIDDEN,
    404: codes.NOT_FOUND,
    405: codes.METHOD_NOT_ALLOWED,
    413: codes.BODY_TOO_LARGE,
}
# MessageIn's validator words it "content is 123,456 characters; the limit is 100,000".
_TOO_LONG = re.compile(r"content is [\d,]+ characters; the limit is [\d,]+")

UNREADABLE_BODY = (
    "the body could not be read as JSON (not UTF-8, or nested more than "
    "a parser allows); send one JSON object, Content-Type: application/json"
)
NOT_JSON = "the body must be a JSON object, sent with Content-Type: application/json"
# pydantic's error types for a body that is JSON but not an object (a list, a number, null)
_NOT_AN_OBJECT = {"model_attributes_type", "dict_type", "model_type"}
_JSON_KINDS: dict[type, str] = {
    list: "a list",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
    type(None): "null",
}

Handler = Callable[[Request, Exception], Coroutine[Any, Any, JSONResponse]]


class ErrorBody(BaseModel):
    code: str = Field(description="stable and machine-readable")
    message: str


class ErrorOut(BaseModel):
    error: ErrorBody


class ApiError(Exception):
    """An error the API itself raises (not the facade), with its code and message."""

    def __init__(self, kind: WireError, message: str, **extra: object) -> None:
        super().__init__(message)
        self.kind, self.message, self.extra = kind, message, extra


class BodyTooLarge(HTTPException):
    """Raised from `receive`; FastAPI re-raises HTTPExceptions met while reading a body."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            413,
            f"the request body is over the limit of {limit:,} bytes (MEMLANE_MAX_BODY_BYTES); "
            "send fewer messages per request",
        )


def error_response(
    kind: WireError,
    message: str,
    *,
    headers: Mapping[str, str] | None = None,
    **extra: object,
) -> JSONResponse:
    """The error body of `kind`, answered with its status."""
    body = {"error": {"code": kind.code, "message": message, **extra}}
    return JSONResponse(body, status_code=kind.status, headers=headers)


class BodyLimit:
    """Refuses a body over `limit()` bytes: at once when Content-Length says so, and while
    reading when a chunked body grows past the limit."""

    def __init__(self, app: ASGIApp, limit: Callable[[], int]) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit()
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            await _too_large(limit)(scope, receive, send)
            return
        received, started = 0, False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        async def watching_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, watching_send)
        except BodyTooLarge:  # raised outside a route's handlers (none caught it)
            if started:
                raise
            await _too_large(limit)(scope, receive, send)


def _too_large(limit: int) -> JSONResponse:
    return error_response(codes.BODY_TOO_LARGE, str(BodyTooLarge(limit).detail))


async def on_api_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    headers = {"WWW-Authenticate": "Bearer"} if exc.kind.status == 401 else None
    if exc.kind.status == 429:  # whole seconds, as the header's syntax wants; rounded up
        headers = {"Retry-After": str(max(1, math.ceil(float(str(exc.extra["retry_after"])))))}
    return error_response(exc.kind, exc.message, headers=headers, **exc.extra)


async def on_memlane_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, MemlaneError)
    kind = next((k for t, k in _STATUS_OF if isinstance(exc, t)), codes.CONFLICT)
    if isinstance(exc, BudgetError):
        return error_response(kind, str(exc), budget=exc.budget, required=exc.required)
    if isinstance(exc, BrokerUnavailableError):
        return error_response(kind, str(exc), headers={"Retry-After": "5"}, job_ids=exc.job_ids)
    return error_response(kind, str(exc))


async def on_database_down(_: Request, exc: Exception) -> JSONResponse:
    # The pool replaces a dropped connection on the next checkout: a retry succeeds once
    # the server is back, with no restart of memlane.
    return error_response(
        codes.DATABASE_UNAVAILABLE,
        "the database is not reachable right now; retry shortly",
        headers={"Retry-After": "1"},
    )


async def on_http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 400:
        # FastAPI answers 400 when it cannot parse the body at all (not UTF-8, or JSON
        # nested too deeply for the parser): bad input like any other, rejected whole.
        transcript = request.url.path.endswith("/transcripts")
        return error_response(
            codes.INVALID_TRANSCRIPT if transcript else codes.VALIDATION_ERROR,
            f"{'invalid transcript' if transcript else 'invalid request'}: {UNREADABLE_BODY}",
        )
    kind = _HTTP_CODES.get(exc.status_code, codes.HTTP_ERROR)
    # http_error keeps the framework's status, whatever it is
    body = {"error": {"code": kind.code, "message": str(exc.detail)}}
    return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)


def validation_handler(transcript_paths: Collection[str]) -> Handler:
    """422 naming each field at fault (paths like `messages.2.role`). On a transcript
    route the code is invalid_transcript, and one message over MAX_MESSAGE_CHARS is
    413 message_too_large with its index."""

    async def on_validation_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        on_transcript = request.url.path in transcript_paths
        details: list[dict[str, str]] = []
        said: list[str] = []
        for error in exc.errors():
            loc = [str(part) for part in error["loc"]]
            field = ".".join(loc[1:] if loc[:1] == ["body"] and len(loc) > 1 else loc)
            message = str(error["msg"]).removeprefix("Value error, ")
            if error["type"] == "json_invalid":
                # FastAPI puts the character offset where a field belongs ("607"): say
                # where as the CLI does, by line and column.
                field, message = "body", _json_problem(exc.body, error)
            elif loc == ["body"] and not _is_json(request):
                message = NOT_JSON
            elif loc == ["body"] and error["type"] in _NOT_AN_OBJECT:
                kind = _JSON_KINDS.get(type(error.get("input")), "something else")
                message = f"the body must be a JSON object, not {kind}" + (
                    ": one transcript per request (`memlane enqueue` also takes a list or JSONL)"
                    if on_transcript
                    else ""
                )
            if on_transcript and loc[1:2] == ["messages"] and _TOO_LONG.search(message):
                index = int(loc[2])
                text = f"message {index} is too long: {field}: {message}"
                return error_response(codes.MESSAGE_TOO_LARGE, text, index=index)
            details.append({"field": field, "message": message})
            # The whole body at fault by a rule of memlane's (or not JSON at all): its
            # words name the fields themselves, as the facade, the CLI and MCP say it.
            whole = error["type"] == "json_invalid" or (
                loc == ["body"] and error["type"] == "value_error"
            )
            said.append(message if whole else f"{field}: {message}")
        shown = "; ".join(said[:5])
        more = f" (and {len(details) - 5} more)" if len(details) > 5 else ""
        refused = codes.INVALID_TRANSCRIPT if on_transcript else codes.VALIDATION_ERROR
        prefix = "invalid transcript" if on_transcript else "invalid request"
        return error_response(refused, f"{prefix}: {shown}{more}", details=details[:50])

    return on_validation_error


def _json_problem(body: Any, error: Mapping[str, Any]) -> str:
    """`invalid JSON at line L column C: reason`, the CLI's words for a file."""
    reason = str(error.get("ctx", {}).get("error", "not JSON"))
    offset = error["loc"][-1]
    if isinstance(body, str) and isinstance(offset, int):
        where = json.JSONDecodeError(reason, body, offset)
        return f"invalid JSON at line {where.lineno} column {where.colno}: {reason}"
    return f"invalid JSON: {reason}"


def _is_json(request: Request) -> bool:
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    return kind == "application/json" or kind.endswith("+json")


async def on_unexpected(_: Request, exc: Exception) -> JSONResponse:
    # Starlette re-raises the error after this response, so the server logs it once.
    return error_response(codes.INTERNAL_ERROR, "internal error; the server log has details")


def install(
    app: FastAPI, *, max_body_bytes: Callable[[], int], transcript_paths: Collection[str]
) -> None:
    """Give `app` the error shape and the body size limit."""
    app.add_middleware(BodyLimit, limit=max_body_bytes)
    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(MemlaneError, on_memlane_error)
    app.add_exception_handler(HTTPException, on_http_error)
    app.add_exception_handler(OperationalError, on_database_down)
    app.add_exception_handler(RequestValidationError, validation_handler(transcript_paths))
    app.add_exception_handler(Exception, on_unexpected)
