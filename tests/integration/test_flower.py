"""Flower sees the fleet: a real Flower process against the test Redis and a real worker."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from memlane.config.settings import load_settings
from memlane.models.webhook_schemas import WebhookCreate
from memlane.service.facade import Memlane
from memlane.service.webhooks import Webhooks
from tests.integration.fleet import ROOT, WorkerProcess, fleet_env, stop_group, wait_for_jobs
from tests.integration.test_fleet import transcript
from tests.webhook_receiver import Receiver

pytestmark = pytest.mark.timeout(180)
AUTH = ("ops", "s3cret")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until_up(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"{url} did not answer in {timeout}s")


def test_flower_lists_the_workers_and_their_tasks(pg: str, redis_url: str, tmp_path: Path) -> None:
    worker = WorkerProcess(fleet_env(pg, redis_url), name="flowerseen", log_dir=tmp_path)
    port = free_port()
    log = (tmp_path / "flower.log").open("wb")
    flower = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "memlane.workers.app",
            "flower",
            f"--port={port}",
            "--address=127.0.0.1",
            f"--basic-auth={AUTH[0]}:{AUTH[1]}",
        ],
        cwd=ROOT,
        env={**os.environ, **fleet_env(pg, redis_url)},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        worker.wait_ready()
        wait_until_up(f"{base}/healthcheck")  # Flower must be listening to see the events
        workers: dict = {}
        tasks: dict = {}

        def poll(done: Callable[[], bool]) -> None:
            nonlocal workers, tasks
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    assert httpx.get(f"{base}/api/workers", timeout=5).status_code == 401
                    workers = httpx.get(
                        f"{base}/api/workers?refresh=1", auth=AUTH, timeout=10
                    ).json()
                    tasks = httpx.get(f"{base}/api/tasks", auth=AUTH, timeout=10).json()
                except httpx.TransportError:
                    pass
                if done():
                    return
                time.sleep(0.5)

        def seen(*names: str) -> bool:
            return set(names) <= {task.get("name") for task in tasks.values()}

        with Memlane(load_settings(database_url=pg, broker_url=redis_url)) as lane:
            # Flower answering its health check does not mean it receives events yet: a
            # task sent before then shows up without its name. A first transcript's tasks
            # prove the events arrive; the second one's are then seen whole.
            wait_for_jobs(pg, lane.enqueue(transcript("c0", "u0", 5)).job_ids)
            poll(lambda: bool(tasks))
            convo = transcript("c1", "u1", 5)
            convo["messages"][0]["content"] = "I prefer TypeScript over JavaScript."
            job_ids = lane.enqueue(convo).job_ids
        wait_for_jobs(pg, job_ids)
        with Memlane(load_settings(database_url=pg, broker_url=redis_url)) as lane:
            included = lane.assemble("u1", "TypeScript?").included_memory_ids
            lane.flush()  # the access record is published now
        poll(
            lambda: (
                any("flowerseen" in name for name in workers)
                and seen("memlane.extract", "memlane.store")
                and any(
                    t.get("name") == "memlane.record_access" and t.get("state") == "SUCCESS"
                    for t in tasks.values()
                )
            )
        )
        access = [t for t in tasks.values() if t.get("name") == "memlane.record_access"]
        # a summary of the ids, not Celery's repr of every one of them
        assert access and access[0]["args"].startswith(f"([{included[0]!r}] 1 memory id, ")
        assert any("flowerseen" in name for name in workers), workers
        names = {task["name"] for task in tasks.values()}
        assert {"memlane.extract", "memlane.store"} <= names
        # Task arguments are ids: Flower shows no user content.
        assert all("TypeScript" not in str(task.get("args")) for task in tasks.values())
        # the webhooks queue, its tasks' args the delivery ids (beat's tick, sent by hand)
        with (
            Receiver() as receiver,
            Memlane(load_settings(database_url=pg, broker_url=redis_url)) as lane,
        ):
            Webhooks(pg).add(WebhookCreate(url=receiver.url, events=["memory.forgotten"]))
            lane.forget("u1", lane.list_memories("u1")[0].id)
            from memlane.workers import tasks as celery_tasks

            celery_tasks.webhooks_dispatch.apply_async()
            poll(lambda: seen("memlane.webhooks.dispatch", "memlane.webhooks.deliver"))
            assert len(receiver.accepted()) == 1
        queues = {q["name"] for w in workers.values() for q in w.get("active_queues") or []}
        assert "webhooks" in queues, workers
        metrics = httpx.get(f"{base}/metrics", auth=AUTH, timeout=10)
        assert metrics.status_code == 200 and "flower_events_total" in metrics.text
    finally:
        # Flower's event thread can sit in a blocking broker read after SIGTERM (deployments
        # kill it after a grace period too, e.g. dimagi/commcare-cloud#3665)
        stop_group(flower, grace_s=10)
        worker.stop()
