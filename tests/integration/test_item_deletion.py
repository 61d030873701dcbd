"""Soul blocks and procedures can be deleted (facade, API, CLI): gone from the store and
from the next context of a warm working set, another user's untouched. Both backends."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from fastapi.testclient import TestClient

from memlane.api.app import create_app
from memlane.pipeline.errors import NotFoundError
from memlane.service.facade import Memlane
from tests.integration.test_cli import cli


def test_the_facade_deletes_a_soul_block_and_a_procedure(lane: Memlane, now: datetime) -> None:
    for user in ("u1", "u2"):
        lane.set_soul_block(user, "style", "Answer like a falconer.")
        lane.add_procedure(user, "brew", "Steep the sencha leaves for 2 minutes.")
        lane.add_procedure(user, "deploy", "Run the harbour checks, then tag.")
    lane.warm("u1")
    before = lane.assemble("u1", "brew sencha deploy harbour", now=now).text
    assert "falconer" in before and "sencha" in before and "harbour" in before

    lane.delete_soul_block("u1", "style")
    brew = next(p for p in lane.procedures("u1") if p.name == "brew")
    assert lane.delete_procedure("u1", brew.id) == brew.id  # by id
    assert lane.delete_procedure("u1", "deploy").startswith("proc_")  # by name
    after = lane.assemble("u1", "brew sencha deploy harbour", now=now).text
    assert "falconer" not in after and "sencha" not in after and "harbour" not in after
    assert lane.soul_blocks("u1") == [] and lane.procedures("u1") == []
    with pytest.raises(NotFoundError, match="no style soul block"):
        lane.delete_soul_block("u1", "style")
    with pytest.raises(NotFoundError, match="no procedure 'deploy'"):
        lane.delete_procedure("u1", "deploy")
    with pytest.raises(NotFoundError):
        lane.delete_procedure("u1", next(p.id for p in lane.procedures("u2")))  # not theirs
    assert len(lane.soul_blocks("u2")) == 1 and len(lane.procedures("u2")) == 2


def test_the_api_and_the_cli_delete_them(lane: Memlane, db_url: str) -> None:
    with TestClient(create_app(lane)) as client:
        assert client.put("/v1/users/u1/soul/identity", json={"content": "A tutor."}).is_success
        made = client.post("/v1/users/u1/procedures", json={"name": "n1", "content": "Steps."})
        assert client.delete("/v1/users/u1/soul/identity").status_code == 204
        assert client.delete("/v1/users/u1/soul/identity").status_code == 404
        assert client.delete("/v1/users/u1/procedures/n1").status_code == 204
        assert client.delete(f"/v1/users/u1/procedures/{made.json()['id']}").status_code == 404
        assert client.delete("/v1/users/u1/soul/nonsense").status_code == 422

    assert cli(db_url, "soul", "set", "--user", "u1", "style", "--content", "Brief.").exit_code == 0
    listed = cli(db_url, "soul", "list", "--user", "u1", "--json")
    assert [b["content"] for b in json.loads(listed.stdout)] == ["Brief."]
    added = cli(db_url, "procedures", "add", "--user", "u1", "--name", "p", "--content", "Do.")
    procedure_id = added.stdout.strip()
    assert procedure_id.startswith("proc_")
    assert "Do." in cli(db_url, "procedures", "list", "--user", "u1").stdout
    deleted = cli(db_url, "procedures", "delete", "--user", "u1", procedure_id)
    assert deleted.exit_code == 0 and procedure_id in deleted.stderr
    assert cli(db_url, "soul", "delete", "--user", "u1", "style").exit_code == 0
    missing = cli(db_url, "soul", "delete", "--user", "u1", "style")
    assert missing.exit_code != 0 and "no style soul block" in missing.output
    assert lane.soul_blocks("u1") == [] and lane.procedures("u1") == []
