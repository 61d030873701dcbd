"""`memlane keys` on both backends: a key printed once on stdout and checked by the
keyring, listed without its secret, rotated (both valid in the grace period) and revoked;
bad input exits 2 and stores nothing; `memlane serve` on a public address with stored keys
alone, its access log naming the key."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx

from memlane.service.keys.keyring import Keyring
from tests.integration.test_cli import cli
from tests.integration.test_flower import free_port, wait_until_up
from tests.integration.test_startup_guards import MEMLANE, NO_KEYS, run, start, stop


def test_create_list_rotate_revoke(db_url: str) -> None:
    made = cli(
        db_url,
        "keys",
        "create",
        "--name",
        "acme-app",
        "--users",
        "acme:*",
        "--users",
        "beta",
        "--scopes",
        "read",
        "--expires",
        "30d",
        "--rate",
        "5",
    )
    assert made.exit_code == 0, made.output
    key = made.stdout.strip()
    assert key.startswith("mlk_") and "\n" not in key
    grant = Keyring(db_url).verify(key)
    assert grant is not None and grant.users == ("acme:*", "beta") and grant.scopes == {"read"}
    assert grant.rate_per_s == 5.0 and grant.actor == "api:acme-app"

    listed = cli(db_url, "keys", "list", "--json")
    (info,) = json.loads(listed.stdout)
    assert info["name"] == "acme-app" and info["state"] == "active" and info["expires_at"]
    assert key.split("_", 2)[2] not in listed.stdout

    rotated = cli(db_url, "keys", "rotate", "acme-app", "--grace", "1h")
    assert rotated.exit_code == 0, rotated.output
    new = rotated.stdout.strip()
    keyring = Keyring(db_url)
    assert keyring.verify(key) is not None and keyring.verify(new) is not None

    revoked = cli(db_url, "keys", "revoke", "acme-app")
    assert revoked.exit_code == 0 and "revoked acme-app" in revoked.stderr
    keyring = Keyring(db_url)
    assert keyring.verify(key) is None and keyring.verify(new) is None
    assert cli(db_url, "keys", "revoke", "acme-app").exit_code == 1  # none left to revoke


def test_bad_input_exits_2_and_stores_nothing(db_url: str) -> None:
    for args in (
        ("--name", "x", "--scopes", "owner"),
        ("--name", "bad name"),
        ("--name", "x", "--users", "a*b"),
        ("--name", "x", "--expires", "soon"),
    ):
        result = cli(db_url, "keys", "create", *args)
        assert result.exit_code == 2, (args, result.output)
        assert result.stderr.startswith("error: "), result.stderr
    assert json.loads(cli(db_url, "keys", "list", "--json").stdout) == []


def test_serve_on_a_public_address_starts_with_stored_keys_alone(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'api.db'}"
    argv = [*MEMLANE, "serve", "--host", "0.0.0.0", "--port", str(port := free_port())]
    refused = run(argv, tmp_path, MEMLANE_DATABASE_URL=db)  # no key anywhere yet
    assert refused.returncode != 0 and NO_KEYS in refused.stderr
    made = cli(db, "keys", "create", "--name", "app", "--scopes", "read")
    assert made.exit_code == 0, made.output
    server = start(argv, tmp_path, tmp_path / "serve.log", MEMLANE_DATABASE_URL=db)
    try:
        wait_until_up(f"http://127.0.0.1:{port}/healthz", timeout=60)
        url = f"http://127.0.0.1:{port}/v1/users/u1/memories"
        assert httpx.get(url, timeout=10).status_code == 401
        key = {"Authorization": f"Bearer {made.stdout.strip()}"}
        assert httpx.get(url, headers=key, timeout=10).status_code == 200
        log = (tmp_path / "serve.log").read_text()
        assert "GET /v1/users/u1/memories 200" in log and "key=api:app" in log
        assert made.stdout.strip() not in log
    finally:
        stop(server)


def test_mcp_over_http_on_a_public_address_starts_with_stored_keys_alone(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'mcp.db'}"
    port = free_port()
    argv = [*MEMLANE, "mcp", "--transport", "http", "--host", "0.0.0.0", "--port", str(port)]
    assert NO_KEYS in run(argv, tmp_path, MEMLANE_DATABASE_URL=db).stderr
    assert cli(db, "keys", "create", "--name", "agent").exit_code == 0
    server = start(argv, tmp_path, tmp_path / "mcp.log", MEMLANE_DATABASE_URL=db)
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        answer = None
        for _ in range(600):
            try:
                answer = httpx.post(url, json={}, timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        assert answer is not None and answer.status_code == 401
    finally:
        stop(server)
