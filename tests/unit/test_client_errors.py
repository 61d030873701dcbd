"""The client's typed errors are driven by the API's own table of error codes: every code
the server can answer has a client exception, and each is built from any wire body of
its code (fields missing or malformed included) without raising something else."""

from __future__ import annotations

import ast
import pickle
from pathlib import Path
from typing import Any

import httpx
import pytest

import memlane.api
from memlane.client.errors import ERRORS, ApiError, BrokerUnavailable, BudgetExceeded, error_from
from memlane.pipeline import error_codes
from memlane.pipeline.error_codes import API_ERRORS, WireError
from memlane.pipeline.errors import BrokerUnavailableError, BudgetError

API_DIR = Path(memlane.api.__file__).parent
# A plausible value of each extra field an error body carries.
SAMPLE = {
    "details": [{"field": "budget_tokens", "message": "too small"}],
    "budget": 1,
    "required": 57,
    "index": 2,
    "checks": {"database": "unreachable"},
    "job_ids": ["job_a", "job_b"],
    "retry_after": 0.25,
}


def codes_the_api_uses() -> set[str]:
    """Every `codes.NAME` the server's source names (read with ast, so a code in a path no
    test runs counts too)."""
    used: set[str] = set()
    for path in API_DIR.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                used.update([node.attr] if node.value.id == "codes" else [])
            assert not (
                isinstance(node, ast.Call) and getattr(node.func, "id", "") == "WireError"
            ), f"{path.name} makes its own error code; add it to memlane.pipeline.error_codes"
    return used


def test_the_api_answers_only_codes_of_the_table() -> None:
    used = codes_the_api_uses()
    assert {"BUDGET_EXCEEDED", "NOT_READY", "UNAUTHORIZED", "INTERNAL_ERROR"} <= used
    for name in used:
        assert getattr(error_codes, name) in API_ERRORS, name
    declared = {v for v in vars(error_codes).values() if isinstance(v, WireError)}
    assert declared == set(API_ERRORS)
    assert len({kind.code for kind in API_ERRORS}) == len(API_ERRORS)


def test_the_api_source_holds_no_code_outside_the_table() -> None:
    # The server once wrote codes as string literals; any left would bypass the table.
    for kind in API_ERRORS:
        for path in API_DIR.rglob("*.py"):
            assert f'"{kind.code}"' not in path.read_text(encoding="utf-8"), (path, kind.code)


def response(status: int, error: Any) -> httpx.Response:
    request = httpx.Request("POST", "http://memlane.test/v1/context")
    return httpx.Response(status, json={"error": error}, request=request)


@pytest.mark.parametrize("kind", API_ERRORS, ids=lambda kind: kind.code)
def test_every_code_is_a_typed_client_error_built_from_its_body(kind: WireError) -> None:
    assert kind in ERRORS, f"{kind.code} has no client exception in memlane.client.errors"
    fields = {name: SAMPLE[name] for name in kind.fields}
    body = {"code": kind.code, "message": f"what went wrong: {kind.code}", **fields}
    error = error_from(response(kind.status, body))
    assert type(error) is ERRORS[kind]
    assert (error.status, error.code, error.details) == (kind.status, kind.code, fields)
    assert error.message == f"what went wrong: {kind.code}" and kind.code in str(error)
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), copy.code, copy.details) == (type(error), error.code, error.details)
    # the same code with none of its fields, or with fields of the wrong type, still builds
    bare = error_from(response(kind.status, {"code": kind.code, "message": "m"}))
    assert type(bare) is ERRORS[kind] and bare.details == {}
    odd = error_from(response(kind.status, {"code": kind.code, **dict.fromkeys(kind.fields, "?")}))
    assert type(odd) is ERRORS[kind] and odd.message == ""


def test_budget_exceeded_is_the_facades_budget_error_with_its_figures() -> None:
    body = {
        "code": "budget_exceeded",
        "message": "pinned items need 57",
        "budget": 1,
        "required": 57,
    }
    error = error_from(response(422, body))
    assert isinstance(error, BudgetExceeded) and isinstance(error, BudgetError)
    assert (error.budget, error.required, error.over_by) == (1, 57, 56)


def test_broker_unavailable_carries_the_queued_job_ids() -> None:
    body = {"code": "broker_unavailable", "message": "stored, queued", "job_ids": ["j1", "j2"]}
    error = error_from(response(503, body))
    assert isinstance(error, BrokerUnavailable) and isinstance(error, BrokerUnavailableError)
    assert error.job_ids == ["j1", "j2"]


@pytest.mark.parametrize(
    ("status", "error", "kind", "code"),
    [
        (
            422,
            {"code": "from_a_newer_server", "message": "m"},
            "InvalidRequest",
            "from_a_newer_server",
        ),
        (418, {"code": "teapot", "message": "m"}, "ApiError", "teapot"),
        (502, "Bad Gateway", "ServerError", "http_502"),
        (404, {"message": "no code"}, "NotFound", "http_404"),
    ],
)
def test_an_unknown_code_or_a_foreign_body_is_still_a_typed_error(
    status: int, error: Any, kind: str, code: str
) -> None:
    found = error_from(response(status, error))
    assert isinstance(found, ApiError)
    assert (type(found).__name__, found.code, found.status) == (kind, code, status)
