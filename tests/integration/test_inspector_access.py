"""The inspector's doors (memlane.api.ui) through an ASGI client on both backends: no
page or action without a valid session, CSRF refused, users out of reach not found, the
cookie's flags, actions recorded under the session's actor, read-only pages (the
playground included) writing nothing, and stored keys: a tenant key sees only its users,
a read key cannot act, the sweep needs admin, a revoked or expired key's session ends."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text, update

from memlane.api.app import create_app
from memlane.api.ui import access
from memlane.config.settings import load_settings
from memlane.models.db import get_engine, unit_of_work
from memlane.models.tables import ApiKeyRow
from memlane.service.facade import Memlane
from memlane.service.keys.keyring import Keyring

KEY = "inspector-key-5d1e"
USER = "insp-u1"
FACTS = (
    "The user is vegetarian and avoids fish",
    "The user prefers Python for backend services",
    "The user lives in Lisbon near the river",
)


@pytest.fixture
def lane(db_url: str) -> Iterator[Memlane]:
    with Memlane(load_settings(database_url=db_url, api_keys=[f"lead:{KEY}"])) as lane:
        yield lane


@pytest.fixture
def seeded(lane: Memlane) -> dict[str, str]:
    ids = {fact: lane.add_memory(USER, {"content": fact, "category": "fact"}).id for fact in FACTS}
    pack = lane.assemble(USER, "what does the user eat?", budget_tokens=40)
    lane.flush()
    return {"memory": ids[FACTS[0]], "pack": str(pack.pack_data["pack_id"])}


@pytest.fixture
def client(lane: Memlane) -> Iterator[TestClient]:
    with TestClient(create_app(lane), follow_redirects=False) as client:
        yield client


def sign_in(client: TestClient, key: str = KEY) -> None:
    form = client.get("/ui/signin")
    token = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert token is not None
    done = client.post("/ui/signin", data={"key": key, "csrf": token[1], "next": "/ui/users"})
    assert done.status_code == 303


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found is not None
    return found[1]


def pages(ids: dict[str, str]) -> list[str]:
    memory = f"/ui/users/{USER}/memories/{ids['memory']}"
    return [
        "/ui",
        "/ui/users?q=insp",
        f"/ui/users/{USER}",
        f"{memory}?query=food",
        f"/ui/packs/{ids['pack']}?where=Lisbon",
        f"/ui/users/{USER}/playground?run=1&query=food&budget=60",
        "/ui/jobs?status=failed",
    ]


def actions(ids: dict[str, str]) -> list[str]:
    memory = f"/ui/users/{USER}/memories/{ids['memory']}"
    return [f"{memory}/pin", f"{memory}/forget", f"{memory}/edit", "/ui/jobs/sweep"]


def history(lane: Memlane, memory_id: str) -> list[tuple[str, str]]:
    return [(event.kind, event.actor) for event in lane.memory_history(USER, memory_id)]


def test_no_page_or_action_without_a_valid_session(
    client: TestClient, lane: Memlane, seeded: dict[str, str]
) -> None:
    before = history(lane, seeded["memory"])
    for cookie in (None, "forged.value", "eyJhIjogImFwaSJ9.AAAA"):
        client.cookies.clear()
        if cookie:
            client.cookies.set("memlane_ui", cookie, path="/ui")
        for path in pages(seeded):
            answer = client.get(path)
            assert answer.status_code == 303, path
            assert answer.headers["location"].startswith("/ui/signin?next=/ui")
            assert "vegetarian" not in answer.text
        for path in actions(seeded):
            answer = client.post(path, data={"csrf": "x", "content": "changed"})
            assert answer.status_code == 401, path
    client.cookies.clear()
    hostile = {"cookie": "memlane_ui=é.ü".encode()}  # any bytes a client may send
    assert client.get(pages(seeded)[2], headers=hostile).status_code == 303
    assert history(lane, seeded["memory"]) == before
    assert lane.get_memory(USER, seeded["memory"]).tier == "candidate"


def test_a_wrong_key_signs_nobody_in(client: TestClient, seeded: dict[str, str]) -> None:
    form = client.get("/ui/signin")
    refused = client.post(
        "/ui/signin", data={"key": "not-the-key", "csrf": csrf_of(form.text), "next": "/ui"}
    )
    assert refused.status_code == 303 and "failed=1" in refused.headers["location"]
    assert "memlane_ui=" not in refused.headers.get("set-cookie", "")
    assert client.get(f"/ui/users/{USER}").status_code == 303


def test_the_session_cookie_is_httponly_strict_and_scoped(client: TestClient) -> None:
    form = client.get("/ui/signin")
    done = client.post("/ui/signin", data={"key": KEY, "csrf": csrf_of(form.text)})
    cookie = next(c for c in done.headers.get_list("set-cookie") if c.startswith("memlane_ui="))
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/ui" in cookie
    assert done.headers["location"] == "/ui/users"  # no `next`: the users page


def test_a_session_ends_when_its_key_is_removed(db_url: str, seeded: dict[str, str]) -> None:
    first = load_settings(database_url=db_url, api_keys=[f"lead:{KEY}"])
    with TestClient(create_app(settings=first), follow_redirects=False) as client:
        sign_in(client)
        cookie = client.cookies["memlane_ui"]
        assert client.get(f"/ui/users/{USER}").status_code == 200
    second = load_settings(database_url=db_url, api_keys=["other:k2"])
    with TestClient(create_app(settings=second), follow_redirects=False) as client:
        client.cookies.set("memlane_ui", cookie, path="/ui")
        assert client.get(f"/ui/users/{USER}").status_code == 303


def test_csrf_is_refused(client: TestClient, lane: Memlane, seeded: dict[str, str]) -> None:
    sign_in(client)
    page = client.get(f"/ui/users/{USER}/memories/{seeded['memory']}")
    assert page.status_code == 200
    for token in ("", "wrong", csrf_of(page.text)[:-2] + "xx", "ünïcode"):
        for path in actions(seeded):
            answer = client.post(path, data={"csrf": token, "content": "changed"})
            assert answer.status_code == 403, (path, token)
    assert lane.get_memory(USER, seeded["memory"]).content == FACTS[0]
    assert lane.get_memory(USER, seeded["memory"]).status == "active"
    # the sign-in form's own token: a cross-site post cannot sign a browser in
    client.cookies.clear()
    client.get("/ui/signin")
    for guess in ("guess", "ünïcode"):
        assert client.post("/ui/signin", data={"key": KEY, "csrf": guess}).status_code == 403


def test_actions_go_through_the_use_cases_and_record_the_actor(
    client: TestClient, lane: Memlane, seeded: dict[str, str]
) -> None:
    sign_in(client)
    memory = f"/ui/users/{USER}/memories/{seeded['memory']}"
    token = csrf_of(client.get(memory).text)
    pinned = client.post(memory + "/pin", data={"csrf": token})
    assert pinned.status_code == 303 and "done=pinned" in pinned.headers["location"]
    edited = client.post(
        memory + "/edit",
        data={"csrf": token, "content": "The user is vegan", "importance": "0.9"},
    )
    assert edited.status_code == 303
    stored = lane.get_memory(USER, seeded["memory"])
    assert (stored.tier, stored.content, stored.importance) == ("pinned", "The user is vegan", 0.9)
    assert ("pinned", "ui:api:lead") in history(lane, seeded["memory"])
    assert ("edited", "ui:api:lead") in history(lane, seeded["memory"])
    bad = client.post(memory + "/edit", data={"csrf": token, "importance": "lots"})
    assert bad.status_code == 422 and "importance" in bad.text


def test_unknown_users_memories_packs_and_jobs_are_not_found(
    client: TestClient, seeded: dict[str, str]
) -> None:
    sign_in(client)
    assert "insp-u1" not in client.get("/ui/users?q=nobody").text
    for path in (
        "/ui/users/nobody",
        "/ui/users/nobody/memories/" + seeded["memory"],  # another user's memory
        f"/ui/users/{USER}/memories/mem_000000000000000000000000",
        "/ui/packs/pack-that-never-was",
    ):
        answer = client.get(path)
        assert answer.status_code == 404, path
        assert "vegetarian" not in answer.text
    token = csrf_of(client.get(f"/ui/users/{USER}").text)
    assert client.post("/ui/jobs/no-such-job/retry", data={"csrf": token}).status_code == 404


def test_read_only_pages_write_nothing(
    client: TestClient, lane: Memlane, seeded: dict[str, str]
) -> None:
    sign_in(client)

    def state() -> tuple[object, ...]:
        lane.flush()
        with get_engine(lane.url).connect() as conn:
            return (
                conn.execute(text("SELECT count(*) FROM context_packs")).scalar_one(),
                conn.execute(text("SELECT count(*) FROM memory_events")).scalar_one(),
                tuple(
                    conn.execute(
                        text(
                            "SELECT id, access_count, accessed_at, change_seq FROM memories "
                            "ORDER BY id"
                        )
                    ).all()
                ),
            )

    before = state()
    for path in pages(seeded):
        assert client.get(path, follow_redirects=True).status_code == 200, path
    assert state() == before


def test_the_pages_load_nothing_from_another_host(
    client: TestClient, seeded: dict[str, str]
) -> None:
    sign_in(client)
    for path in pages(seeded)[1:]:
        html = client.get(path).text
        linked = re.findall(r'(?:src|href)="([^"]+)"', html)
        assert all(url.startswith(("/", "?", "#")) for url in linked), (path, linked)
        for url in {u for u in linked if u.startswith("/ui/static/")}:
            assert client.get(url).status_code == 200, url


def test_a_user_out_of_the_keys_reach_is_not_found_anywhere(
    client: TestClient, lane: Memlane, seeded: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every page and action asks access.may_see_user, the one place scoped keys answer:
    a key that does not reach the user finds nothing of theirs, and changes nothing."""
    result = lane.enqueue(
        {
            "conversation_id": "insp-c1",
            "user_id": USER,
            "final": True,
            "messages": [{"role": "user", "content": "I live in Lisbon."}],
        }
    )
    lane.wait(result.job_ids, timeout=60)
    sign_in(client)
    token = csrf_of(client.get("/ui/users").text)
    assert USER in client.get("/ui/jobs?status=done").text  # reached: listed

    monkeypatch.setattr(access, "may_see_user", lambda session, user_id: user_id != USER)
    assert USER not in client.get("/ui/users?q=insp").text
    assert USER not in client.get("/ui/jobs?status=done").text
    for path in pages(seeded)[2:-1]:
        answer = client.get(path)
        assert answer.status_code == 404, path
        assert "vegetarian" not in answer.text and "Lisbon" not in answer.text
    for path in actions(seeded)[:3]:
        assert client.post(path, data={"csrf": token, "content": "x"}).status_code == 404
    retry = client.post(f"/ui/jobs/{result.job_ids[0]}/retry", data={"csrf": token})
    assert retry.status_code == 404
    assert lane.get_memory(USER, seeded["memory"]).tier == "candidate"
    assert lane.job(result.job_ids[0]).status == "done"


# ---------------------------------------------------------------- stored keys (issue 36)

TENANT = "insp-t:1"  # reached by the tenant key below; USER ("insp-u1") is not


def server_keyring(client: TestClient) -> Keyring:
    """The app's own keyring: a key changed through it is seen at once (another
    process's change, within CACHE_S)."""
    keyring: Keyring = client.app.state.runtime.keyring()  # type: ignore[attr-defined]
    return keyring


def test_a_tenant_key_signs_in_and_sees_only_its_users(
    client: TestClient, lane: Memlane, seeded: dict[str, str]
) -> None:
    own = lane.add_memory(TENANT, {"content": "The user rides a bike to work", "category": "fact"})
    key = server_keyring(client).create("tenant-t", users=["insp-t:*"]).key
    sign_in(client, key)
    assert "bike" in client.get(f"/ui/users/{TENANT}").text
    found = client.get("/ui/users?q=insp").text
    assert TENANT in found and USER not in found
    for path in pages(seeded)[2:-1]:  # USER's page, memory, pack and playground
        answer = client.get(path)
        assert answer.status_code == 404, path
        assert "vegetarian" not in answer.text and "Lisbon" not in answer.text
    token = csrf_of(client.get("/ui/users").text)
    for path in actions(seeded)[:3]:
        assert client.post(path, data={"csrf": token, "content": "x"}).status_code == 404, path
    assert lane.get_memory(USER, seeded["memory"]).tier == "candidate"
    pinned = client.post(f"/ui/users/{TENANT}/memories/{own.id}/pin", data={"csrf": token})
    assert pinned.status_code == 303
    events = lane.memory_history(TENANT, own.id)
    assert ("pinned", "ui:api:tenant-t") in [(e.kind, e.actor) for e in events]


def test_another_tenants_many_users_do_not_crowd_a_keys_own_out_of_the_search(
    client: TestClient, lane: Memlane
) -> None:
    """The search's limit (50) counts users the key reaches: 60 users of another tenant
    sorted before the tenant's own do not hide it, nor are they listed."""
    for n in range(60):
        lane.add_memory(f"insp-a{n:02d}", {"content": f"Fact number {n}"})
    lane.add_memory(TENANT, {"content": "The user rides a bike to work"})
    lane.add_memory("insp-qx", {"content": "Not the tenant's: `_` is no wildcard"})
    patterns = ["insp-t:*", "insp_q*"]
    sign_in(client, server_keyring(client).create("tenant-t", users=patterns).key)
    found = client.get("/ui/users?q=insp").text
    assert TENANT in found
    assert "insp-a" not in found and "insp-qx" not in found
    client.cookies.clear()
    sign_in(client)  # a bootstrap key reaches every user: the first 50 of them
    everyone = client.get("/ui/users?q=insp").text
    assert "insp-a00" in everyone and TENANT not in everyone


def test_a_read_key_reads_the_pages_but_cannot_act(
    client: TestClient, lane: Memlane, seeded: dict[str, str]
) -> None:
    key = server_keyring(client).create("reader", scopes=["read"]).key
    sign_in(client, key)
    memory = f"/ui/users/{USER}/memories/{seeded['memory']}"
    page = client.get(memory)
    assert page.status_code == 200 and "vegetarian" in page.text
    token = csrf_of(page.text)
    for path in actions(seeded):
        refused = client.post(path, data={"csrf": token, "content": "changed"})
        assert refused.status_code == 403, path
        assert "scope" in refused.text and "reader" in refused.text
    assert lane.get_memory(USER, seeded["memory"]).tier == "candidate"
    assert lane.get_memory(USER, seeded["memory"]).status == "active"
    assert client.post("/ui/signout", data={"csrf": token}).status_code == 303  # may leave


def test_the_sweep_needs_an_admin_key(client: TestClient, seeded: dict[str, str]) -> None:
    key = server_keyring(client).create("writer", scopes=["read", "write"]).key
    sign_in(client, key)
    token = csrf_of(client.get("/ui/jobs").text)
    refused = client.post("/ui/jobs/sweep", data={"csrf": token})
    assert refused.status_code == 403 and "admin" in refused.text
    client.cookies.clear()
    sign_in(client, server_keyring(client).create("ops", scopes=["admin"]).key)
    token = csrf_of(client.get("/ui/jobs").text)
    assert client.post("/ui/jobs/sweep", data={"csrf": token}).status_code == 303


@pytest.mark.parametrize("ending", ["revoked", "expired"])
def test_a_session_ends_when_its_stored_key_stops_being_valid(
    client: TestClient, lane: Memlane, seeded: dict[str, str], ending: str
) -> None:
    keyring = server_keyring(client)
    made = keyring.create("leaving")
    sign_in(client, made.key)
    user_page = f"/ui/users/{USER}"
    token = csrf_of(client.get(user_page).text)
    assert client.get(user_page).status_code == 200
    if ending == "revoked":
        Keyring(lane.url).revoke("leaving")  # by another process: seen within CACHE_S
    else:
        with unit_of_work(lane.url) as session:
            past = datetime.now(UTC) - timedelta(seconds=1)
            session.execute(
                update(ApiKeyRow).where(ApiKeyRow.id == made.info.id).values(expires_at=past)
            )
    keyring.forget_cache()  # CACHE_S passed
    answer = client.get(user_page)
    assert answer.status_code == 303 and answer.headers["location"].startswith("/ui/signin")
    pin = client.post(f"{user_page}/memories/{seeded['memory']}/pin", data={"csrf": token})
    assert pin.status_code == 401
    assert lane.get_memory(USER, seeded["memory"]).tier == "candidate"
