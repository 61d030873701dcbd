"""/v1/status and `memlane status`: whether workers answer for each queue and how many
messages wait, `ok` or `degraded`; /readyz stays about the API's own needs (the
database), so a fleet with no workers, or no broker, keeps serving contexts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from memlane.api.app import create_app
from memlane.config.settings import load_settings
from memlane.models.schemas import FleetStatus
from memlane.pipeline.errors import BrokerUnavailableError
from memlane.service.facade import Memlane
from memlane.service.fleet_status import StatusCache, fleet_status
from tests.integration.fleet import WorkerProcess, fleet_env
from tests.integration.test_cli import cli
from tests.integration.test_no_job_stranded import closed_port, transcript

pytestmark = pytest.mark.timeout(180)


def test_a_broker_that_is_down_is_degraded_and_the_api_stays_ready(pg: str) -> None:
    settings = load_settings(database_url=pg, broker_url=f"redis://127.0.0.1:{closed_port()}/0")
    with TestClient(create_app(settings=settings)) as client:
        ready = client.get("/readyz")
        assert ready.status_code == 200, ready.text
        assert ready.json()["checks"] == {"database": "ok", "schema": "ok"}
        answer = client.get("/v1/status")
        assert answer.status_code == 200
        status = answer.json()
        assert status["status"] == "degraded" and status["broker"].startswith("unreachable")
        assert {q["name"] for q in status["queues"]} == {"ingest", "extract", "store", "webhooks"}
        assert all(q["workers"] is None for q in status["queues"])
        assert "no job can be published" in status["problems"][0]
        context = client.post("/v1/context", json={"user_id": "u1", "query": "tea"})
        assert context.status_code == 200  # assembling needs no broker
    result = cli(pg, "status", MEMLANE_BROKER_URL=settings.broker_url or "")
    assert result.exit_code == 1 and "degraded: broker unreachable" in result.output


def test_queues_without_workers_are_degraded_with_their_depth(pg: str, redis_url: str) -> None:
    with Memlane(load_settings(database_url=pg, broker_url=redis_url)) as lane:
        jobs = lane.enqueue(transcript()).job_ids
        status = fleet_status(lane.settings, timeout_s=0.5)
    assert jobs and status.status == "degraded" and status.broker == "ok"
    by_name = {q.name: q for q in status.queues}
    assert by_name["extract"].workers == 0 and by_name["extract"].depth == len(jobs)
    assert by_name["store"].depth == 0
    assert any("queue extract" in p and "waiting" in p for p in status.problems)


def test_workers_on_every_queue_are_ok_on_every_door(
    pg: str, redis_url: str, tmp_path: Path
) -> None:
    env = fleet_env(pg, redis_url)
    worker = WorkerProcess(env, name="status", log_dir=tmp_path)
    try:
        worker.wait_ready()
        settings = load_settings(database_url=pg, broker_url=redis_url)
        with Memlane(settings) as lane, TestClient(create_app(lane)) as client:
            first = client.get("/v1/status").json()
            assert first["status"] == "ok", first
            assert all(q["workers"] == 1 for q in first["queues"]), first
            # answered from the cache for a few seconds: the same check
            assert client.get("/v1/status").json()["checked_at"] == first["checked_at"]
        result = cli(pg, "status", "--json", MEMLANE_BROKER_URL=redis_url)
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["status"] == "ok"
    finally:
        worker.stop()


def test_the_embedded_default_has_no_fleet_to_watch(db_url: str) -> None:
    with Memlane(load_settings(database_url=db_url)) as lane:
        status = lane.status()
    assert (status.status, status.mode, status.problems) == ("ok", "embedded", [])


def test_the_cache_checks_again_once_its_time_is_up() -> None:
    now = [0.0]
    checks: list[int] = []

    def check() -> FleetStatus:
        checks.append(1)
        return fleet_status(load_settings())

    cache = StatusCache(check, ttl_s=5.0, clock=lambda: now[0])
    cache.get()
    now[0] = 4.9
    cache.get()
    assert len(checks) == 1
    now[0] = 5.0
    cache.get()
    assert len(checks) == 2


def test_a_broker_down_at_enqueue_is_visible_in_the_status(db_url: str) -> None:
    down = f"redis://127.0.0.1:{closed_port()}/0"
    with Memlane(load_settings(database_url=db_url, broker_url=down)) as lane:
        with pytest.raises(BrokerUnavailableError):
            lane.enqueue(transcript())
        assert lane.status().status == "degraded"
