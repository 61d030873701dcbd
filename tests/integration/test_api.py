"""The HTTP API over real PostgreSQL, through an ASGI client. With no broker configured the
embedded in-process worker runs the jobs."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from memlane.api.app import create_app, main, render_openapi
from memlane.config.settings import load_settings
from memlane.models.db import get_engine
from memlane.models.schemas import MAX_MESSAGE_CHARS
from memlane.pipeline.errors import ConfigurationError, MemlaneError
from memlane.service.facade import Memlane
from memlane.service.readiness import check_database
from tests.conftest import EXAMPLES

EXAMPLE = EXAMPLES / "maya-01-auth-migration.json"
OPENAPI = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
KEYS = ("first-key-7f3a9c", "second-key-b81d02")


@pytest.fixture
def lane(pg: str) -> Iterator[Memlane]:
    with Memlane(load_settings(database_url=pg)) as lane:
        yield lane


@pytest.fixture
def client(lane: Memlane) -> Iterator[TestClient]:
    with TestClient(create_app(lane)) as client:
        yield client


def count(url: str, table: str) -> int:
    with get_engine(url).connect() as conn:
        return int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())


def transcript(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "conversation_id": "c1",
        "user_id": "u1",
        "messages": [
            {"role": "user", "content": "I prefer TypeScript over JavaScript."},
            {"role": "assistant", "content": "Noted, TypeScript it is."},
            {"role": "user", "content": "My deadline is March 3."},
        ],
    }
    body.update(changes)
    return body


def error_of(response: Any) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}, body
    error: dict[str, Any] = body["error"]
    return error


# --------------------------------------------------------------------------- auth, health


def test_with_keys_configured_every_v1_route_needs_one_of_them(pg: str) -> None:
    settings = load_settings(database_url=pg, api_keys=",".join(KEYS))
    with TestClient(create_app(settings=settings)) as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        assert client.get("/readyz").status_code == 200
        path = "/v1/users/u1/memories"
        for headers in (
            {},
            {"Authorization": "Bearer wrong-key"},
            {"Authorization": f"Bearer {KEYS[0]}x"},
            {"Authorization": f"Basic {KEYS[0]}"},
            {"Authorization": "Bearer "},
        ):
            response = client.get(path, headers=headers)
            assert response.status_code == 401, headers
            assert error_of(response)["code"] == "unauthorized"
            assert response.headers["www-authenticate"] == "Bearer"
        assert client.post("/v1/context", json={"user_id": "u1"}).status_code == 401
        for key in KEYS:
            response = client.get(path, headers={"Authorization": f"Bearer {key}"})
            assert response.status_code == 200
            assert response.json()["memories"] == []


def test_readyz_is_about_the_database_not_the_broker(pg: str, redis_url: str) -> None:
    # A broker (or worker) outage must not take assembling out of rotation: /v1/status
    # reports it (tests/integration/test_fleet_status.py).
    for broker in ("redis://127.0.0.1:1/0", redis_url):
        settings = load_settings(database_url=pg, broker_url=broker)
        with TestClient(create_app(settings=settings)) as client:
            response = client.get("/readyz")
            assert response.status_code == 200, broker
            assert response.json()["checks"] == {"database": "ok", "schema": "ok"}


def test_readyz_names_an_unreachable_database_and_the_app_still_starts() -> None:
    settings = load_settings(database_url="postgresql+psycopg://nobody@127.0.0.1:1/none")
    with TestClient(create_app(settings=settings)) as client:
        assert client.get("/healthz").status_code == 200
        response = client.get("/readyz")
        assert response.status_code == 503
        assert error_of(response)["checks"] == {"database": "unreachable (OperationalError)"}


def test_the_readiness_check_names_a_schema_that_is_behind(tmp_path: Path) -> None:
    checks = check_database(f"sqlite:///{tmp_path / 'empty.db'}")
    assert checks["database"] == "ok"
    assert checks["schema"].startswith("at None, needs ")
    assert "memlane db upgrade" in checks["schema"]


# --------------------------------------------------------------------------- size limits


def test_a_body_over_the_limit_is_refused_whole_declared_or_chunked(pg: str) -> None:
    settings = load_settings(database_url=pg, max_body_bytes=2048)
    body = json.dumps(transcript(messages=[{"role": "user", "content": "x" * 3000}])).encode()
    with TestClient(create_app(settings=settings)) as client:
        declared = client.post("/v1/transcripts", content=body)
        chunked = client.post("/v1/transcripts", content=iter([body[:1500], body[1500:]]))
        small = client.post("/v1/transcripts", json=transcript())
    for response in (declared, chunked):
        assert response.status_code == 413
        error = error_of(response)
        assert error["code"] == "body_too_large"
        assert "2,048 bytes" in error["message"]
    assert small.status_code == 202  # the limit is not refusing everything
    assert count(pg, "messages") == 3


def send_raw(
    app: Any, chunks: list[bytes], headers: list[tuple[bytes, bytes]]
) -> tuple[int, str, int]:
    """POST the chunks straight through ASGI; (status, error code, chunks the app read)."""
    handed: list[bytes] = []
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if len(handed) == len(chunks):
            return {"type": "http.disconnect"}
        handed.append(chunks[len(handed)])
        return {"type": "http.request", "body": handed[-1], "more_body": len(handed) < len(chunks)}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/transcripts",
        "raw_path": b"/v1/transcripts",
        "root_path": "",
        "query_string": b"",
        "server": ("testserver", 80),
        "client": ("testclient", 1),
        "headers": [(b"content-type", b"application/json"), *headers],
    }
    asyncio.run(app(scope, receive, send))
    code = json.loads(sent[1]["body"])["error"]["code"]
    return sent[0]["status"], code, len(handed)


def test_a_chunked_body_is_cut_off_once_it_passes_the_limit(pg: str) -> None:
    app = create_app(settings=load_settings(database_url=pg, max_body_bytes=2500))
    chunks = [b"{" + b" " * 999] * 5  # 1,000 bytes each, no Content-Length
    assert send_raw(app, chunks, []) == (413, "body_too_large", 3)  # stopped at 3,000 bytes


def test_a_declared_length_over_the_limit_is_refused_before_reading(pg: str) -> None:
    app = create_app(settings=load_settings(database_url=pg, max_body_bytes=2500))
    chunks = [b"{" + b" " * 999] * 5
    assert send_raw(app, chunks, [(b"content-length", b"5000")]) == (413, "body_too_large", 0)
    # under the limit, the body is read whole and judged on its content
    assert send_raw(app, [b"{}"], [(b"content-length", b"2")]) == (422, "invalid_transcript", 1)


def test_one_message_over_the_per_message_limit_is_413_naming_it(
    client: TestClient, pg: str
) -> None:
    messages = transcript()["messages"]
    messages[2] = {"role": "user", "content": "y" * (MAX_MESSAGE_CHARS + 1)}
    response = client.post("/v1/transcripts", json=transcript(messages=messages))
    assert response.status_code == 413
    error = error_of(response)
    assert error["code"] == "message_too_large"
    assert error["index"] == 2
    assert "messages.2.content" in error["message"]
    assert f"{MAX_MESSAGE_CHARS + 1:,} characters" in error["message"]
    assert count(pg, "messages") == 0


# --------------------------------------------------------------------------- validation


def _without_user_id() -> dict[str, Any]:
    body = transcript()
    del body["user_id"]
    return body


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        (_without_user_id(), "user_id", "Field required"),
        (
            transcript(
                messages=[{"role": "user", "content": "hi"}, {"role": "bot", "content": "x"}]
            ),
            "messages.1.role",
            "'user', 'assistant', 'system' or 'tool'",
        ),
        (transcript(messages=[{"role": "user", "content": "   "}]), "messages.0.content", "empty"),
        (transcript(messages=[]), "messages", "at least 1"),
    ],
    ids=["missing-user-id", "unknown-role", "empty-content", "no-messages"],
)
def test_a_malformed_transcript_is_422_naming_the_field_and_writes_nothing(
    client: TestClient, pg: str, body: dict[str, Any], field: str, words: str
) -> None:
    response = client.post("/v1/transcripts", json=body)
    assert response.status_code == 422
    error = error_of(response)
    assert error["code"] == "invalid_transcript"
    assert f"{field}: " in error["message"]
    assert words in error["message"]
    assert [d["field"] for d in error["details"]] == [field]
    assert count(pg, "messages") == 0
    assert count(pg, "conversations") == 0


def test_other_bad_bodies_are_422_validation_error(client: TestClient) -> None:
    response = client.post("/v1/context", json={"user_id": "u1", "budget_tokens": 0})
    assert response.status_code == 422
    error = error_of(response)
    assert error["code"] == "validation_error"
    assert "budget_tokens: Input should be greater than or equal to 1" in error["message"]
    response = client.put("/v1/users/u1/soul/mood", json={"content": "calm"})
    assert error_of(response)["code"] == "validation_error"
    assert "path.kind" in error_of(response)["message"]
    assert error_of(client.get("/v1/nowhere"))["code"] == "not_found"


# --------------------------------------------------------------------------- the happy path


def wait_for_jobs(client: TestClient, job_ids: list[str], timeout: float = 120.0) -> set[str]:
    deadline = time.monotonic() + timeout
    while True:
        statuses = {client.get(f"/v1/jobs/{job_id}").json()["status"] for job_id in job_ids}
        if statuses <= {"done", "failed"} or time.monotonic() > deadline:
            return statuses
        time.sleep(0.1)


def test_transcript_to_jobs_to_context_to_pack(client: TestClient, lane: Memlane) -> None:
    example = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    response = client.post("/v1/transcripts", json=example)
    assert response.status_code == 202
    accepted = response.json()
    assert accepted["stored_messages"] == len(example["messages"])
    assert len(accepted["job_ids"]) >= 1
    assert wait_for_jobs(client, accepted["job_ids"]) == {"done"}

    again = client.post("/v1/transcripts", json=example).json()
    assert (again["stored_messages"], again["job_ids"]) == (0, [])  # idempotent
    assert accepted["no_job_reason"] is None
    assert again["no_job_reason"].startswith(("no extraction due yet", "every message"))

    ask = {"user_id": "maya", "query": "Which language does Maya prefer?", "budget_tokens": 2000}
    response = client.post("/v1/context", json=ask)
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"context", "json", "pack"}
    assert '<m id="' in body["context"]
    assert "TypeScript" in body["context"]
    pack = body["pack"]
    assert 0 < pack["used_tokens"] <= 2000 == pack["budget_tokens"]
    assert any(item["included"] and item["section"] == "memory" for item in pack["items"])

    # The second call may rank differently: the first moved accessed_at of what it used.
    as_json = client.post("/v1/context", json={**ask, "format": "json"}).json()
    assert json.loads(as_json["context"]) == as_json["json"]
    assert {m["id"] for m in as_json["json"]["memories"]} & {
        m["id"] for m in body["json"]["memories"]
    }

    lane.flush()
    stored = client.get(f"/v1/packs/{pack['pack_id']}")
    assert stored.status_code == 200
    assert stored.json()["pack_id"] == pack["pack_id"]
    assert stored.json()["used_tokens"] == pack["used_tokens"]
    assert error_of(client.get("/v1/packs/pack_missing"))["code"] == "not_found"


# --------------------------------------------------------------------------- memories


def context_of(client: TestClient, user_id: str) -> dict[str, Any]:
    response = client.post(
        "/v1/context", json={"user_id": user_id, "strategy": "important", "budget_tokens": 3000}
    )
    assert response.status_code == 200
    return dict(response.json())


def memory_ids_in_context(client: TestClient, user_id: str) -> list[str]:
    """The full ids of the memories a context includes, read through its pack."""
    pack = context_of(client, user_id)["pack"]
    return [i["id"] for i in pack["items"] if i["section"] == "memory" and i["included"]]


def test_memories_add_list_pin_quarantine_restore_delete(client: TestClient) -> None:
    base = "/v1/users/u1/memories"
    response = client.post(
        base, json={"content": "Drinks dark roast coffee every morning.", "category": "preference"}
    )
    assert response.status_code == 201
    memory = response.json()
    mid = memory["id"]
    assert (memory["tier"], memory["status"], memory["user_id"]) == ("candidate", "active", "u1")
    assert [m["id"] for m in client.get(base).json()["memories"]] == [mid]
    assert (
        client.get(f"{base}/{mid}").json()["content"] == "Drinks dark roast coffee every morning."
    )
    assert error_of(client.get(f"/v1/users/u2/memories/{mid}"))["code"] == "not_found"

    pinned = client.patch(f"{base}/{mid}", json={"tier": "pinned"}).json()
    assert pinned["tier"] == "pinned"
    assert memory_ids_in_context(client, "u1") == [mid]
    # the context shows the memory's short id, which the API takes in place of the full one
    assert f'<m id="{pinned["ref"]}"' in context_of(client, "u1")["context"]
    assert client.get(f"{base}/{pinned['ref']}").json()["id"] == mid

    quarantined = client.patch(f"{base}/{mid}", json={"status": "quarantined"}).json()
    assert (quarantined["status"], quarantined["tier"]) == ("quarantined", "pinned")
    assert mid not in memory_ids_in_context(client, "u1")
    assert client.get(base).json() == {"memories": [], "next_cursor": None}
    quarantined_page = client.get(base, params={"status": "quarantined"}).json()
    assert [m["id"] for m in quarantined_page["memories"]] == [mid]

    restored = client.patch(f"{base}/{mid}", json={"status": "active", "sensitive": True}).json()
    assert (restored["status"], restored["sensitive"]) == ("active", True)
    assert mid not in memory_ids_in_context(client, "u1")  # sensitive stays out
    client.patch(f"{base}/{mid}", json={"sensitive": False})
    assert mid in memory_ids_in_context(client, "u1")

    response = client.delete(f"{base}/{mid}")
    assert response.status_code == 204
    assert response.content == b""
    assert client.get(f"{base}/{mid}").json()["status"] == "deleted"
    assert mid not in memory_ids_in_context(client, "u1")
    assert [m["id"] for m in client.get(base, params={"status": "all"}).json()["memories"]] == [mid]
    assert client.delete(f"{base}/mem_nope").status_code == 404
    bad = client.patch(f"{base}/{mid}", json={"status": "superseded"})
    assert error_of(bad)["code"] == "validation_error"


def test_pinned_items_over_the_budget_are_422_with_the_figures(client: TestClient) -> None:
    long = "The user keeps a long list of notes about the migration plan. " * 20
    client.post("/v1/users/u1/memories", json={"content": long, "tier": "pinned"})
    response = client.post("/v1/context", json={"user_id": "u1", "budget_tokens": 50})
    assert response.status_code == 422
    error = error_of(response)
    assert error["code"] == "budget_exceeded"
    assert error["budget"] == 50
    assert error["required"] > 50


def test_soul_blocks_and_procedures(client: TestClient) -> None:
    response = client.put("/v1/users/u1/soul/identity", json={"content": "A careful engineer."})
    assert response.status_code == 200
    client.put("/v1/users/u1/soul/identity", json={"content": "A calm, careful engineer."})
    blocks = client.get("/v1/users/u1/soul").json()
    assert [(b["kind"], b["content"]) for b in blocks] == [
        ("identity", "A calm, careful engineer.")
    ]
    response = client.post(
        "/v1/users/u1/procedures",
        json={"name": "release checklist", "content": "Tag, build, smoke-test, announce."},
    )
    assert response.status_code == 201
    assert [p["name"] for p in client.get("/v1/users/u1/procedures").json()] == [
        "release checklist"
    ]
    assert client.get("/v1/users/u2/procedures").json() == []
    assert "A calm, careful engineer." in context_of(client, "u1")["context"]


# --------------------------------------------------------------------------- jobs


def test_only_a_failed_job_can_be_retried(client: TestClient, lane: Memlane, pg: str) -> None:
    example = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    job_id = client.post("/v1/transcripts", json=example).json()["job_ids"][0]
    assert lane.wait([job_id]) == {job_id: "done"}
    response = client.post(f"/v1/jobs/{job_id}/retry")
    assert response.status_code == 409
    assert error_of(response)["code"] == "conflict"
    assert "only a failed job can be retried" in error_of(response)["message"]
    assert error_of(client.post("/v1/jobs/job_missing/retry"))["code"] == "not_found"

    with get_engine(pg).begin() as conn:
        conn.execute(text("UPDATE jobs SET status = 'failed' WHERE id = :id"), {"id": job_id})
    response = client.post(f"/v1/jobs/{job_id}/retry")
    assert response.status_code == 202
    assert response.json()["status"] == "queued"
    assert lane.wait([job_id]) == {job_id: "done"}


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (ConfigurationError("MEMLANE_X: bad"), 500, "configuration_error"),
        (MemlaneError("some state conflict"), 409, "conflict"),
        (RuntimeError("a bug"), 500, "internal_error"),
    ],
)
def test_errors_map_to_stable_codes(
    lane: Memlane, monkeypatch: pytest.MonkeyPatch, error: Exception, status: int, code: str
) -> None:
    def fail(_job_id: str) -> None:
        raise error

    monkeypatch.setattr(lane, "job", fail)
    with TestClient(create_app(lane), raise_server_exceptions=False) as client:
        response = client.get("/v1/jobs/job_1")
    assert response.status_code == status
    assert error_of(response)["code"] == code
    if status == 500 and code == "internal_error":
        assert "a bug" not in response.text  # internals stay in the server log


# --------------------------------------------------------------------------- OpenAPI


def test_the_checked_in_openapi_document_matches_the_code(tmp_path: Path) -> None:
    assert OPENAPI.exists(), (
        "regenerate it: python -m memlane.api.app --write-openapi docs/openapi.json"
    )
    assert json.loads(OPENAPI.read_text(encoding="utf-8")) == json.loads(render_openapi()), (
        "the HTTP API changed: regenerate the document with "
        "`python -m memlane.api.app --write-openapi docs/openapi.json` and review the diff"
    )
    written = tmp_path / "openapi.json"
    assert main(["--write-openapi", str(written)]) == 0
    assert written.read_text(encoding="utf-8") == render_openapi()
