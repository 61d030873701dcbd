"""No job stranded: with the broker down, enqueue stores the transcript and its jobs and
says so (BrokerUnavailableError, a 503 over HTTP, naming the jobs); a sweep by hand
publishes them once the broker is back; an embedded worker resumes what an earlier
process left queued; `jobs retry` takes a queued job untouched past the deadline."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import make_url

from memlane.api.app import create_app
from memlane.config.settings import load_settings
from memlane.pipeline.assembly.records import pack_json
from memlane.pipeline.errors import BrokerUnavailableError, MemlaneError, NotFoundError
from memlane.service.background import PackWriter
from memlane.service.facade import Memlane
from tests.integration.conftest import PG_ADMIN_URL
from tests.integration.fleet import WorkerProcess, fleet_env, job_statuses, wait_for_jobs

pytestmark = pytest.mark.timeout(180)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def transcript(conversation: str = "c1") -> dict[str, Any]:
    return {
        "conversation_id": conversation,
        "user_id": "u1",
        "messages": [
            {"role": "user", "content": "I prefer green tea in the morning."},
            {"role": "assistant", "content": "Noted."},
        ],
        "final": True,
    }


@pytest.fixture
def broker_down(db_url: str) -> Iterator[Memlane]:
    down = f"redis://127.0.0.1:{closed_port()}/0"
    with Memlane(load_settings(database_url=db_url, broker_url=down)) as lane:
        yield lane


def test_a_broker_that_is_down_leaves_the_jobs_stored_and_says_so(
    broker_down: Memlane, db_url: str
) -> None:
    with pytest.raises(BrokerUnavailableError, match="memlane jobs sweep") as caught:
        broker_down.enqueue(transcript())
    assert caught.value.job_ids
    assert set(job_statuses(db_url, caught.value.job_ids).values()) == {"queued"}
    with TestClient(create_app(broker_down)) as client:
        answer = client.post("/v1/transcripts", json=transcript("c2"))
    assert answer.status_code == 503 and answer.headers["retry-after"] == "5"
    body = answer.json()["error"]
    assert body["code"] == "broker_unavailable" and body["job_ids"]
    # the embedded worker of a later process resumes them: nothing waits forever
    with Memlane(load_settings(database_url=db_url)) as later:
        assert later.dispatcher  # starting it resumes what earlier processes left queued
        statuses = later.wait([*caught.value.job_ids, *body["job_ids"]], timeout=60)
    assert set(statuses.values()) == {"done"}


def test_a_sweep_by_hand_publishes_what_the_broker_missed(
    pg: str, redis_url: str, tmp_path: Any
) -> None:
    down = f"redis://127.0.0.1:{closed_port()}/0"
    with (
        Memlane(load_settings(database_url=pg, broker_url=down)) as lane,
        pytest.raises(BrokerUnavailableError) as caught,
    ):
        lane.enqueue(transcript())
    worker = WorkerProcess(fleet_env(pg, redis_url), name="sweeper", log_dir=tmp_path)
    try:
        worker.wait_ready()
        # a process of its own, as an operator runs it (this one's Celery app still
        # points at the broker that was down)
        swept = subprocess.run(
            [sys.executable, "-m", "memlane.cli.app", "jobs", "sweep"],
            env={**os.environ, **fleet_env(pg, redis_url)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert swept.returncode == 0, swept.stderr
        assert set(swept.stdout.split()) >= set(caught.value.job_ids)
        assert set(wait_for_jobs(pg, caught.value.job_ids).values()) == {"done"}
    finally:
        worker.stop()


def test_retry_takes_a_queued_job_only_once_it_is_stuck(broker_down: Memlane, db_url: str) -> None:
    with pytest.raises(BrokerUnavailableError) as caught:
        broker_down.enqueue(transcript())
    job_id = caught.value.job_ids[0]
    with pytest.raises(MemlaneError, match="only a failed job can be retried"):
        Memlane(load_settings(database_url=db_url, stuck_after_s=600)).retry_job(job_id)
    time.sleep(0.3)
    with Memlane(load_settings(database_url=db_url, stuck_after_s=0.2)) as embedded:
        retried = embedded.retry_job(job_id)
        assert retried.status == "queued"
        assert embedded.wait([job_id], timeout=60) == {job_id: "done"}


def test_a_database_that_is_down_is_a_503_with_a_code() -> None:
    down = f"postgresql://memlane@127.0.0.1:{closed_port()}/memlane"
    app = create_app(settings=load_settings(database_url=down))
    with TestClient(app, raise_server_exceptions=False) as client:
        for answer in (
            client.post("/v1/context", json={"user_id": "u1", "query": "tea"}),
            client.get("/v1/users/u1/memories"),
            client.get("/readyz"),
        ):
            assert answer.status_code == 503, answer.text
            assert answer.json()["error"]["code"] in ("database_unavailable", "not_ready")


@contextmanager
def database_refused(url: str) -> Iterator[None]:
    """The database refuses connections and drops the open ones (what a restart does to
    its clients), for as long as the block runs; only this database, not the server."""
    name = make_url(url).database
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        try:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
            yield
        finally:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')


def test_a_database_that_goes_away_is_a_503_and_comes_back_without_a_restart(pg: str) -> None:
    with Memlane(load_settings(database_url=pg)) as lane:
        lane.add_memory("u1", {"content": "Likes green tea in the morning."})
        with TestClient(create_app(lane), raise_server_exceptions=False) as client:
            ask = {"user_id": "u1", "query": "tea"}
            assert client.post("/v1/context", json=ask).status_code == 200  # u1's view warm
            with database_refused(pg):
                for answer in (
                    client.post("/v1/context", json=ask),  # the working set's change poll
                    client.post("/v1/context", json={**ask, "user_id": "u2"}),  # a cold user
                    client.get("/v1/users/u1/memories"),
                    client.post("/v1/transcripts", json=transcript()),
                    client.get("/readyz"),
                ):
                    assert answer.status_code == 503, answer.text
                    assert answer.json()["error"]["code"] in ("database_unavailable", "not_ready")
            answer = client.post("/v1/context", json=ask)
            assert answer.status_code == 200 and "green tea" in answer.json()["context"]


def test_packs_assembled_while_the_database_is_away_are_saved_once_it_is_back(
    pg: str, caplog: pytest.LogCaptureFixture
) -> None:
    with Memlane(load_settings(database_url=pg)) as lane:
        lane.add_memory("u1", {"content": "Likes green tea in the morning."})
        result = lane.assemble("u1", "tea")
        lane.flush()
        writer = PackWriter(pg)
        try:
            with database_refused(pg), caplog.at_level(logging.WARNING, "memlane.packs"):
                writer.submit({**result.pack_data, "pack_id": "kept"})
                writer.flush()
                assert "1 context packs kept to save again" in caplog.text
            deadline = time.monotonic() + 20
            while True:
                try:
                    stored = lane.pack("kept")
                    break
                except NotFoundError:
                    assert time.monotonic() < deadline, "the pack was not saved after the outage"
                    time.sleep(0.2)
        finally:
            writer.close()
    assert stored == {**pack_json(result.pack_data), "pack_id": "kept"}
