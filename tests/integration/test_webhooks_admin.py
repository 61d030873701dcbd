"""Managing webhooks: the admin routes, the CLI and the Python client agree, bad input
writes nothing, and what the store owes follows subscriptions (both backends)."""

from __future__ import annotations

import json
import runpy
import time
from pathlib import Path

from fastapi.testclient import TestClient

from memlane.api.app import create_app
from memlane.config.settings import load_settings
from memlane.models.webhook_schemas import WebhookCreate
from memlane.pipeline.webhook_signature import sign
from memlane.service.facade import Memlane
from memlane.service.webhooks import Webhooks
from tests.integration.test_cli import cli

ROOT = Path(__file__).resolve().parents[2]
AUTH = {"Authorization": "Bearer admin-key"}


def test_the_api_adds_lists_and_removes_with_a_key_and_refuses_bad_input(db_url: str) -> None:
    settings = load_settings(database_url=db_url, api_keys="admin-key", embedding_model="hashing")
    with TestClient(create_app(settings=settings)) as client:
        body = {"url": "https://example.com/hook", "events": ["job.done", "job.done"]}
        assert client.post("/v1/webhooks", json=body).status_code == 401
        created = client.post("/v1/webhooks", json=body, headers=AUTH)
        assert created.status_code == 201, created.text
        hook = created.json()
        assert hook["events"] == ["job.done"] and len(hook["secret"]) == 64
        for bad in (
            {"url": "ftp://example.com", "events": ["job.done"]},
            {"url": "https://example.com", "events": ["memory.eaten"]},
            {"url": "https://example.com", "events": []},
        ):
            refused = client.post("/v1/webhooks", json=bad, headers=AUTH)
            assert refused.status_code == 422, refused.text
        listed = client.get("/v1/webhooks", headers=AUTH).json()
        assert [h["id"] for h in listed] == [hook["id"]] and "secret" not in listed[0]
        assert client.get("/v1/webhooks/deliveries", headers=AUTH).json() == []
        assert client.delete(f"/v1/webhooks/{hook['id']}", headers=AUTH).status_code == 204
        missing = client.delete(f"/v1/webhooks/{hook['id']}", headers=AUTH)
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
        assert client.get("/v1/webhooks", headers=AUTH).json() == []


def test_the_cli_adds_lists_and_removes(db_url: str) -> None:
    added = cli(db_url, "webhooks", "add", "https://example.com/h", "--events",
                "memory.created,user.erased", "--users", "team-*", "--json")  # fmt: skip
    assert added.exit_code == 0, added.output
    hook = json.loads(added.output)
    assert (hook["users"], hook["events"]) == ("team-*", ["memory.created", "user.erased"])
    listed = cli(db_url, "webhooks", "list", "--json")
    assert [h["id"] for h in json.loads(listed.output)] == [hook["id"]]
    bad = cli(db_url, "webhooks", "add", "https://example.com/h", "--events", "job.lost")
    assert bad.exit_code == 2 and "Input should be 'job.done'" in bad.output
    assert cli(db_url, "webhooks", "remove", hook["id"]).exit_code == 0
    gone = cli(db_url, "webhooks", "remove", hook["id"])
    assert gone.exit_code == 1 and "no webhook" in gone.output
    assert Webhooks(db_url).subscriptions() == []


def test_deliveries_are_owed_in_the_events_transaction_to_matching_subscriptions(
    db_url: str,
) -> None:
    hooks = Webhooks(db_url)
    team = hooks.add(
        WebhookCreate(url="https://a.example/h", events=["memory.created"], users="team-*")
    )
    every = hooks.add(WebhookCreate(url="https://b.example/h", events=["memory.forgotten"]))
    with Memlane(load_settings(database_url=db_url, embedding_model="hashing")) as lane:
        kept = lane.add_memory("team-a", {"content": "Prefers green tea in the morning"})
        lane.add_memory("solo", {"content": "Lives in Lisbon by the river"})
        lane.forget("team-a", kept.id)
        owed = {(d.webhook_id, d.event_type, d.user_id) for d in hooks.deliveries()}
        assert owed == {
            (team.id, "memory.created", "team-a"),
            (every.id, "memory.forgotten", "team-a"),
        }
        # one event, one id, whichever subscriptions it goes to
        assert len({d.event_id for d in hooks.deliveries()}) == 2
        history = lane.memory_history("team-a", kept.id)
        created = next(d for d in hooks.deliveries() if d.event_type == "memory.created")
        assert created.data["memory_event_id"] == history[0].id
        hooks.remove(every.id)
        assert {d.webhook_id for d in hooks.deliveries()} == {team.id}
        lane.erase_user("team-a")
    assert hooks.deliveries() == []  # the erased user's, dropped; no one asked user.erased


def test_the_receiver_snippet_accepts_a_signed_event_once(capsys: object) -> None:
    receive = runpy.run_path(str(ROOT / "docs" / "snippets" / "webhook_receiver.py"))["receive"]
    receive.__globals__["SECRET"] = "k"
    body = b'{"id":"evt_1","type":"job.done","user_id":"u1","data":{}}'
    header = sign(body, secret="k", timestamp=int(time.time()))
    assert receive(body, header) == 200
    assert receive(body, header) == 200  # the repeat is acknowledged, not handled again
    assert receive(body, header.replace("v1=", "v1=0")) == 400
    assert capsys.readouterr().out.count("job.done u1") == 1  # type: ignore[attr-defined]
