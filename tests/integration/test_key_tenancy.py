"""Keys as data over the HTTP API, on both backends: two tenants' keys on one server,
each refused (404, the same answer whether the user exists or not) on every route that
touches the other's users, enumerated from the app itself so a new route cannot be
forgotten; read-only keys cannot write; expired, revoked and rotated keys; what the
table keeps; and each key's name, never its secret, in memory histories and the access
log."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from sqlalchemy import text, update

from memlane.api.app import create_app
from memlane.config.settings import load_settings
from memlane.models.db import get_engine, unit_of_work
from memlane.models.tables import ApiKeyRow
from memlane.service.facade import Memlane
from memlane.service.keys.keyring import CACHE_S, Keyring
from memlane.service.keys.secrets import split_key
from tests.unit.test_route_scopes import api_routes

ADMIN = "admin:bootstrap-key-5c1e"
PEPPER = "pepper-for-the-tenancy-test"
ACME, GLOBEX = "acme:1", "globex:1"

# What a route reached through the other tenant's user needs to get past validation: a
# refusal must come from the key's reach, not from a malformed request.
BODIES: dict[tuple[str, str], Any] = {
    ("POST", "/v1/transcripts"): {
        "conversation_id": "c-new",
        "messages": [{"role": "user", "content": "I moved to Lisbon."}],
    },
    ("POST", "/v1/context"): {"query": "where do I live"},
    ("POST", "/v1/search"): {"query": "where do I live"},
    ("POST", "/v1/users/{user_id}/memories"): {"content": "I like green tea."},
    ("PATCH", "/v1/users/{user_id}/memories/{memory_id}"): {"importance": 0.4},
    ("PUT", "/v1/users/{user_id}/soul/{kind}"): {"content": "Be brief."},
    ("POST", "/v1/users/{user_id}/procedures"): {"name": "deploy", "content": "Run make."},
}
BODY_USER = {"/v1/transcripts", "/v1/context", "/v1/search"}
OWNED = {"/v1/jobs/{job_id}", "/v1/jobs/{job_id}/retry", "/v1/packs/{pack_id}"}
ADMIN_ONLY = {
    "/v1/keys",
    "/v1/keys/{name_or_id}/revoke",
    "/v1/keys/{name_or_id}/rotate",
    "/v1/jobs/sweep",
    "/v1/status",
    "/metrics",
    "/v1/webhooks",
    "/v1/webhooks/deliveries",
    "/v1/webhooks/{webhook_id}",
}
PUBLIC = {"/healthz", "/readyz"}


@pytest.fixture
def lane(db_url: str) -> Iterator[Memlane]:
    settings = load_settings(
        database_url=db_url, api_keys=ADMIN, key_pepper=PEPPER, embedding_model="hashing"
    )
    with Memlane(settings) as lane:
        yield lane


@pytest.fixture
def client(lane: Memlane) -> Iterator[TestClient]:
    with TestClient(create_app(lane)) as client:
        yield client


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def make_key(client: TestClient, name: str, **body: Any) -> str:
    answer = client.post(
        "/v1/keys", json={"name": name, **body}, headers=bearer("bootstrap-key-5c1e")
    )
    assert answer.status_code == 201, answer.text
    return str(answer.json()["key"])


def seeded(lane: Memlane, user: str) -> dict[str, str]:
    """A memory, a soul block, a procedure, a finished job and a stored pack of `user`:
    the ids the routes name."""
    memory, _ = lane.add_or_confirm(user, {"content": f"{user} keeps bees on the roof."})
    lane.set_soul_block(user, "style", "Short answers.")
    lane.add_procedure(user, "deploy", "Run make deploy.")
    result = lane.enqueue(
        {
            "conversation_id": f"conv-{user}",
            "user_id": user,
            "final": True,
            "messages": [
                {"role": "user", "content": "I work at the harbour office."},
                {"role": "assistant", "content": "Noted."},
            ],
        }
    )
    pack_id = lane.assemble(user, "bees").pack.pack_id
    lane.flush()
    return {
        "user_id": user,
        "memory_id": memory.id,
        "kind": "style",
        "procedure": "deploy",
        "conversation_id": f"conv-{user}",
        "job_id": result.job_ids[0],
        "pack_id": pack_id,
    }


def path_of(route: APIRoute, ids: dict[str, str]) -> str:
    path = route.path.replace(":path}", "}")
    return path.format(**{k: ids.get(k, "x") for k in route.param_convertors})


def body_of(method: str, route: APIRoute, ids: dict[str, str]) -> Any:
    body = BODIES.get((method, route.path))
    if route.path in BODY_USER:
        return {**body, "user_id": ids["user_id"]} if body else None
    return body


def call(client: TestClient, method: str, route: APIRoute, ids: dict[str, str], key: str) -> Any:
    return client.request(
        method, path_of(route, ids), json=body_of(method, route, ids), headers=bearer(key)
    )


def routes_in_order(client: TestClient) -> list[tuple[str, APIRoute]]:
    """Every (method, route) of the app; erasing the user last, since it empties them."""
    found = [
        (method, route)
        for route in api_routes(client.app)  # type: ignore[arg-type]
        if route.include_in_schema
        for method in sorted(route.methods)
    ]
    return sorted(found, key=lambda mr: (mr[1].path == "/v1/users/{user_id}", mr[1].path))


def test_each_tenants_key_gets_404_for_the_others_users_on_every_route(
    client: TestClient, lane: Memlane
) -> None:
    acme_key = make_key(client, "tenant-acme", users=["acme:*"], scopes=["read", "write"])
    globex_key = make_key(client, "tenant-globex", users=["globex:*"], scopes=["read", "write"])
    ids = {ACME: seeded(lane, ACME), GLOBEX: seeded(lane, GLOBEX)}
    checked: set[str] = set()
    for method, route in routes_in_order(client):
        path = route.path
        if path in ADMIN_ONLY | PUBLIC:
            continue
        assert "{user_id}" in path or path in BODY_USER | OWNED, (
            f"{method} {path}: a route that reaches users must be in this test's classes"
        )
        for key, mine, theirs in ((acme_key, ACME, GLOBEX), (globex_key, GLOBEX, ACME)):
            refused = call(client, method, route, ids[theirs], key)
            assert refused.status_code == 404, (method, path, refused.text)
            assert refused.json()["error"]["code"] == "not_found"
            # the same request for the key's own user is not refused: the 404 was the reach
            allowed = call(client, method, route, ids[mine], key)
            assert allowed.status_code not in (401, 403, 404), (method, path, allowed.text)
        checked.add(f"{method} {path}")
    assert len(checked) >= 20 and "DELETE /v1/users/{user_id}" in checked
    # a user nobody has stored gets the same answer as the other tenant's
    ghost = client.get("/v1/users/globex:ghost/memories", headers=bearer(acme_key))
    assert ghost.status_code == 404


def test_refused_writes_change_nothing(client: TestClient, lane: Memlane) -> None:
    acme_key = make_key(client, "tenant-acme", users=["acme:*"])
    theirs = seeded(lane, GLOBEX)
    before = lane.memories_page(GLOBEX, status=None, limit=100)
    for method, path in (
        ("DELETE", f"/v1/users/{GLOBEX}"),
        ("DELETE", f"/v1/users/{GLOBEX}/memories/{theirs['memory_id']}?purge=true"),
        ("PATCH", f"/v1/users/{GLOBEX}/memories/{theirs['memory_id']}"),
    ):
        body = {"importance": 0.1} if method == "PATCH" else None
        assert client.request(method, path, json=body, headers=bearer(acme_key)).status_code == 404
    assert lane.memories_page(GLOBEX, status=None, limit=100) == before


def test_a_read_key_reads_and_cannot_write(client: TestClient, lane: Memlane) -> None:
    reader = make_key(client, "reader", users=["acme:*"], scopes=["read"])
    mine = seeded(lane, ACME)
    assert client.get(f"/v1/users/{ACME}/memories", headers=bearer(reader)).status_code == 200
    assert (
        client.post("/v1/search", json={"user_id": ACME}, headers=bearer(reader)).status_code == 200
    )
    writes = [
        ("POST", f"/v1/users/{ACME}/memories", {"content": "I like green tea."}),
        ("DELETE", f"/v1/users/{ACME}/memories/{mine['memory_id']}", None),
        ("DELETE", f"/v1/users/{ACME}", None),
        ("POST", "/v1/transcripts", {**BODIES[("POST", "/v1/transcripts")], "user_id": ACME}),
        ("POST", f"/v1/jobs/{mine['job_id']}/retry", None),
    ]
    for method, path, body in writes:
        answer = client.request(method, path, json=body, headers=bearer(reader))
        assert answer.status_code == 403, (method, path, answer.text)
        assert answer.json()["error"]["code"] == "forbidden"
    assert lane.get_memory(ACME, mine["memory_id"]).status == "active"
    # admin routes want admin: a read-write key reaching every user is not enough
    writer = make_key(client, "writer")
    for method, path in (("GET", "/v1/status"), ("POST", "/v1/jobs/sweep"), ("GET", "/v1/keys")):
        assert client.request(method, path, headers=bearer(writer)).status_code == 403
    assert client.get("/metrics", headers=bearer(writer)).status_code == 403
    # an admin key limited to some users runs the sweep but cannot make keys
    limited_admin = make_key(client, "acme-admin", users=["acme:*"], scopes=["admin"])
    assert client.post("/v1/jobs/sweep", headers=bearer(limited_admin)).status_code == 202
    made = client.post("/v1/keys", json={"name": "x"}, headers=bearer(limited_admin))
    assert made.status_code == 403
    # nor see or subscribe to every tenant's events
    hook = {"url": "https://example.com/hook", "events": ["job.done"]}
    for key in (writer, limited_admin):
        subscribed = client.post("/v1/webhooks", json=hook, headers=bearer(key))
        assert subscribed.status_code == 403, subscribed.text
        assert client.get("/v1/webhooks/deliveries", headers=bearer(key)).status_code == 403
    assert client.get("/v1/webhooks", headers=bearer(ADMIN.split(":", 1)[1])).json() == []


def test_expired_revoked_and_rotated_keys(client: TestClient, lane: Memlane) -> None:
    path = f"/v1/users/{ACME}/memories"
    expired = make_key(client, "soon-gone", expires_in_s=60)
    with unit_of_work(lane.url) as session:  # its minute passes
        past = datetime.now(UTC) - timedelta(seconds=1)
        session.execute(
            update(ApiKeyRow).where(ApiKeyRow.name == "soon-gone").values(expires_at=past)
        )
    answer = client.get(path, headers=bearer(expired))
    assert answer.status_code == 401 and answer.json()["error"]["code"] == "unauthorized"

    revoked = make_key(client, "to-revoke")
    assert client.get(path, headers=bearer(revoked)).status_code == 200
    done = client.post("/v1/keys/to-revoke/revoke", headers=bearer("bootstrap-key-5c1e"))
    assert done.status_code == 200 and [k["state"] for k in done.json()] == ["revoked"]
    assert client.get(path, headers=bearer(revoked)).status_code == 401

    old = make_key(client, "rotating", users=["acme:*"], scopes=["read"])
    rotated = client.post(
        "/v1/keys/rotating/rotate", json={"grace_s": 4}, headers=bearer("bootstrap-key-5c1e")
    )
    assert rotated.status_code == 201
    new = rotated.json()["key"]
    assert new != old and rotated.json()["info"]["users"] == ["acme:*"]
    assert rotated.json()["info"]["scopes"] == ["read"]
    for key in (old, new):  # both valid during the grace period
        assert client.get(path, headers=bearer(key)).status_code == 200
    time.sleep(4.1)
    assert client.get(path, headers=bearer(old)).status_code == 401
    assert client.get(path, headers=bearer(new)).status_code == 200
    listed = client.get("/v1/keys", headers=bearer("bootstrap-key-5c1e")).json()
    states = sorted(k["state"] for k in listed if k["name"] == "rotating")
    assert states == ["active", "expired"]
    assert all("key" not in k and "key_hash" not in k for k in listed)


def test_the_table_keeps_a_keyed_hash_never_the_key(client: TestClient, lane: Memlane) -> None:
    key = make_key(client, "hashed", users=["acme:*", "beta"], scopes=["read"])
    with get_engine(lane.url).connect() as conn:
        rows = conn.execute(text("SELECT * FROM api_keys")).mappings().all()
    assert len(rows) == 1
    row = rows[0]
    secret = key.split("_", 2)[2]
    assert all(secret not in str(value) for value in row.values())
    expected = hmac.new(PEPPER.encode(), secret.encode(), hashlib.sha256).hexdigest()
    assert row["key_hash"] == expected and row["id"] == key.split("_")[1]

    def listed(value: Any) -> Any:  # JSON: text on SQLite, decoded on PostgreSQL
        return json.loads(value) if isinstance(value, str) else value

    assert row["name"] == "hashed" and listed(row["scopes"]) == ["read"]
    assert listed(row["users"]) == ["acme:*", "beta"]
    # the same secret under another pepper is another hash: a dump alone checks nothing
    other = Keyring(lane.url, pepper=None)
    assert other.verify(key) is None
    assert Keyring(lane.url, pepper=load_settings(key_pepper=PEPPER).key_pepper).verify(key)


def test_the_key_name_is_the_actor_and_in_the_access_log(
    client: TestClient, lane: Memlane, caplog: pytest.LogCaptureFixture
) -> None:
    key = make_key(client, "acme-app", users=["acme:*"])
    with caplog.at_level(logging.INFO, logger="memlane.api.access"):
        made = client.post(
            f"/v1/users/{ACME}/memories",
            json={"content": "I sail on Sundays."},
            headers=bearer(key),
        )
        assert made.status_code == 201
        client.get(f"/v1/users/{GLOBEX}/memories", headers=bearer(key))
        client.get("/healthz")
    history = lane.memory_history(ACME, made.json()["id"])
    assert [event.actor for event in history] == ["api:acme-app"]
    lines = [r.getMessage() for r in caplog.records if r.name == "memlane.api.access"]
    assert f"POST /v1/users/{ACME}/memories 201" in lines[0] and lines[0].endswith(
        "key=api:acme-app"
    )
    assert lines[1].startswith(f"GET /v1/users/{GLOBEX}/memories 404") and lines[1].endswith(
        "key=api:acme-app"
    )
    assert lines[2].startswith("GET /healthz 200") and lines[2].endswith("key=-")
    secret = key.split("_", 2)[2]
    assert not any(secret in line for line in lines)
    # the last use is recorded (once a minute per process at most)
    listed = client.get("/v1/keys", headers=bearer("bootstrap-key-5c1e")).json()
    assert next(k for k in listed if k["name"] == "acme-app")["last_used_at"] is not None


def test_with_no_key_anywhere_the_api_is_open_until_one_is_made(db_url: str) -> None:
    settings = load_settings(database_url=db_url, embedding_model="hashing")
    with Memlane(settings) as lane, TestClient(create_app(lane)) as client:
        assert client.get(f"/v1/users/{ACME}/memories").status_code == 200
        made = client.post("/v1/keys", json={"name": "first", "scopes": ["admin"]})
        assert made.status_code == 201
        assert client.get(f"/v1/users/{ACME}/memories").status_code == 401
        key = made.json()["key"]
        assert client.get(f"/v1/users/{ACME}/memories", headers=bearer(key)).status_code == 200
        # revoking the only key does not open the API again
        assert client.post("/v1/keys/first/revoke", headers=bearer(key)).status_code == 200
        for headers in ({}, bearer(key)):
            assert client.get(f"/v1/users/{ACME}/memories", headers=headers).status_code == 401


def test_another_process_sees_a_revocation_within_the_cache_time(db_url: str) -> None:
    now = [0.0]
    serving = Keyring(db_url, ticks=lambda: now[0])  # another process's keyring
    admin = Keyring(db_url)
    key = admin.create("app", users=["acme:*"]).key
    assert serving.verify(key) is not None
    assert serving.cached(key) is not False  # now answered without the database
    admin.revoke("app")
    now[0] += CACHE_S - 0.1
    assert serving.verify(key) is not None  # still cached there
    now[0] += 0.2
    assert serving.verify(key) is None
    assert serving.verify("mlk_000000000000_" + "x" * 43) is None  # an unknown id


def test_the_inspector_takes_stored_keys_once_they_close_the_api(db_url: str) -> None:
    """With stored keys alone the inspector must not read "no key configured" as an open
    server: the open session ends, any text is refused, and a stored key signs in with
    its own reach (tests/integration/test_inspector_access.py holds the rest)."""
    settings = load_settings(database_url=db_url, embedding_model="hashing")
    with Memlane(settings) as lane, TestClient(create_app(lane), follow_redirects=False) as client:

        def sign_in(key: str) -> Any:
            form = client.get("/ui/signin")
            token = re.search(r'name="csrf" value="([^"]+)"', form.text)
            assert token is not None
            return client.post("/ui/signin", data={"key": key, "csrf": token[1], "next": "/ui"})

        lane.add_memory(ACME, {"content": "The user lives in Lisbon."})
        assert sign_in("anything").status_code == 303  # open: no key anywhere (as before)
        assert client.get("/ui/users").status_code == 200
        made = Keyring(lane.url).create("app", users=["acme:*"]).key
        runtime = client.app.state.runtime  # type: ignore[attr-defined]
        runtime.keyring().forget_cache()  # as another process sees it within CACHE_S
        assert client.get("/ui/users").status_code == 303  # the open session ends
        refused = sign_in("anything")
        assert refused.status_code == 303 and "failed=1" in refused.headers["location"]
        assert client.get("/ui/users").status_code == 303
        signed = sign_in(made)
        assert signed.status_code == 303 and signed.headers["location"] == "/ui"
        payload = client.cookies["memlane_ui"].rpartition(".")[0]
        remembered = json.loads(base64.urlsafe_b64decode(payload))
        parts = split_key(made)
        assert parts is not None
        key_id, secret = parts
        assert remembered["i"] == key_id  # the key's id, never its secret
        assert secret not in json.dumps(remembered)
        assert client.get(f"/ui/users/{ACME}").status_code == 200
        assert client.get(f"/ui/users/{GLOBEX}").status_code == 404
