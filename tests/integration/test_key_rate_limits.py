"""Rate limits per key over the HTTP API, counted in real Redis: a key's burst passes,
the next request is a 429 with Retry-After, two API apps sharing the Redis share the
budget, and a key without its own limit gets the server's default."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack

import pytest
from fastapi.testclient import TestClient

from memlane.api.app import create_app
from memlane.config.settings import load_settings
from memlane.service.facade import Memlane
from memlane.service.keys.keyring import Keyring
from memlane.service.keys.rate_limit import gcra_wait_ms

ADMIN = "bootstrap-admin-91d0"
PATH = "/v1/users/acme:1/memories"


@pytest.fixture
def lane(sqlite_url: str, redis_url: str) -> Iterator[Memlane]:
    settings = load_settings(
        database_url=sqlite_url,
        api_keys=ADMIN,
        embedding_model="hashing",
        rate_limit_redis_url=redis_url,
        key_rate_per_s=1.0,
        key_burst=2,
    )
    with Memlane(settings) as lane:
        yield lane


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def statuses(clients: list[TestClient], key: str, n: int) -> list[int]:
    return [clients[i % len(clients)].get(PATH, headers=bearer(key)).status_code for i in range(n)]


def test_a_burst_passes_then_429_with_retry_after(lane: Memlane) -> None:
    with TestClient(create_app(lane)) as client:
        made = client.post(
            "/v1/keys", json={"name": "slow", "rate_per_s": 0.5, "burst": 3}, headers=bearer(ADMIN)
        )
        key = made.json()["key"]
        assert statuses([client], key, 3) == [200, 200, 200]
        refused = client.get(PATH, headers=bearer(key))
        assert refused.status_code == 429
        error = refused.json()["error"]
        assert error["code"] == "rate_limited" and "slow" in error["message"]
        assert 0 < error["retry_after"] <= 2.0  # one request each 2 s
        assert refused.headers["retry-after"] == "2"
        time.sleep(error["retry_after"] + 0.05)
        assert client.get(PATH, headers=bearer(key)).status_code == 200


def test_two_api_apps_share_one_budget_through_redis(lane: Memlane) -> None:
    with ExitStack() as stack:
        clients = [stack.enter_context(TestClient(create_app(lane))) for _ in range(2)]
        made = clients[0].post(
            "/v1/keys",
            json={"name": "shared", "rate_per_s": 0.2, "burst": 4},
            headers=bearer(ADMIN),
        )
        # alternating between the apps, 4 pass in all, not 4 each
        assert statuses(clients, made.json()["key"], 8) == [200] * 4 + [429] * 4


def test_a_key_without_a_limit_gets_the_default_and_keys_are_counted_apart(lane: Memlane) -> None:
    keyring = Keyring(lane.url)
    first, second = (keyring.create(name).key for name in ("a", "b"))
    unlimited = keyring.create("c", rate_per_s=0).key
    with TestClient(create_app(lane)) as client:
        assert statuses([client], first, 3) == [200, 200, 429]  # the default: 1/s, burst 2
        assert statuses([client], second, 3) == [200, 200, 429]
        assert statuses([client], unlimited, 10) == [200] * 10
        # the bootstrap key too has the default
        assert statuses([client], ADMIN, 3) == [200, 200, 429]


def test_gcra_lets_a_burst_through_then_one_per_interval() -> None:
    tat, passed = 0.0, []
    for now in (1000.0, 1000.0, 1000.0, 1000.0, 1500.0, 2000.0):
        wait = gcra_wait_ms(tat, now, interval=1000.0, burst=3)
        passed.append(wait == 0)
        if wait == 0:
            tat = max(tat, now) + 1000.0
    assert passed == [True, True, True, False, False, True]
    assert gcra_wait_ms(4000.0, 1000.0, interval=1000.0, burst=3) == 1000.0
