"""Webhooks end to end: a real `celery worker` consuming the webhooks queue with beat,
real Redis and the database, and a real HTTP receiver that fails the first sends."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memlane.client.webhooks import SignatureError, verify
from memlane.config.settings import load_settings
from memlane.models.webhook_schemas import EVENT_TYPES, DeliveryPublic, WebhookCreate
from memlane.service.facade import Memlane
from memlane.service.webhooks import Webhooks
from tests.integration.fleet import WorkerProcess, fleet_env, wait_for_jobs
from tests.integration.test_cli import cli
from tests.llm_stub import LLMStub, malformed
from tests.webhook_receiver import Receiver

pytestmark = pytest.mark.timeout(240)

# fast retries, so a test sees several attempts in seconds
FAST = {
    "webhook_every_s": "0.5",
    "webhook_backoff_s": "0.3",
    "webhook_max_backoff_s": "1",
    "webhook_timeout_s": "5",
}


def said(conversation: str, user: str, fact: str) -> dict[str, Any]:
    messages = []
    for i in range(5):
        messages.append({"role": "user", "content": fact if i == 0 else f"Question {i}."})
        messages.append({"role": "assistant", "content": f"Answer {i}."})
    return {"conversation_id": conversation, "user_id": user, "messages": messages}


@pytest.fixture
def fleet(redis_url: str, tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    started: list[WorkerProcess] = []

    def start(db_url: str, **settings: str) -> WorkerProcess:
        env = fleet_env(db_url, redis_url, embedding_model="hashing", **{**FAST, **settings})
        worker = WorkerProcess(env, log_dir=tmp_path, beat=True, name="hooks")
        started.append(worker)
        worker.wait_ready()
        return worker

    yield start
    for worker in started:
        worker.stop()


def lane_for(db_url: str, redis_url: str) -> Memlane:
    return Memlane(
        load_settings(database_url=db_url, broker_url=redis_url, embedding_model="hashing")
    )


def wait_until(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not after {timeout}s: {what}")
        time.sleep(0.2)


def deliveries(db_url: str, **filters: Any) -> list[DeliveryPublic]:
    return Webhooks(db_url).deliveries(limit=1000, **filters)


def test_each_event_arrives_once_after_dedup_signed_despite_two_failures(
    db_url: str, redis_url: str, fleet: Callable[..., WorkerProcess]
) -> None:
    with Receiver(fail_first=2) as receiver:
        hook = Webhooks(db_url).add(
            WebhookCreate(url=receiver.url, events=list(EVENT_TYPES), users="team-*")  # type: ignore[arg-type]
        )
        fleet(db_url)
        with lane_for(db_url, redis_url) as lane:
            job_ids = lane.enqueue(
                said("c1", "team-a", "I prefer TypeScript over JavaScript for frontend work.")
            ).job_ids
            outsider = lane.enqueue(said("c2", "solo", "I prefer tea over coffee.")).job_ids
            assert wait_for_jobs(db_url, job_ids + outsider) == dict.fromkeys(
                job_ids + outsider, "done"
            )
            memory = lane.list_memories("team-a")[0]
            lane.forget("team-a", memory.id)
        wait_until(
            lambda: {d.status for d in deliveries(db_url)} == {"delivered"},
            "every delivery delivered",
        )
        owed = deliveries(db_url)
        accepted = receiver.accepted()
    # each event once after dedup, and each was tried three times (two 500s, one 200)
    assert sorted(r.event["id"] for r in accepted) == sorted(d.event_id for d in owed)
    tries = Counter(r.event["id"] for r in receiver.received)
    assert set(tries.values()) == {3} and {d.attempts for d in owed} == {3}
    by_type = Counter(r.event["type"] for r in accepted)
    assert by_type == {"job.done": 1, "memory.created": 1, "memory.forgotten": 1}
    # only the subscribed users' events, ids and no text
    assert {r.event["user_id"] for r in accepted} == {"team-a"}
    created = next(r.event for r in accepted if r.event["type"] == "memory.created")
    assert created["data"]["memory_id"] == memory.id and "content" not in created["data"]
    assert "TypeScript" not in b"".join(r.body for r in receiver.received).decode()
    job_done = next(r.event for r in accepted if r.event["type"] == "job.done")
    assert job_done["data"] == {"job_id": job_ids[0], "conversation_id": "c1"}
    # every request, retries too, is signed with the subscription's secret
    for request in receiver.received:
        assert verify(request.body, request.headers["Memlane-Signature"], secret=hook.secret)
        assert request.headers["Memlane-Event-Id"] == request.event["id"]
        with pytest.raises(SignatureError, match="does not match"):
            verify(request.body + b" ", request.headers["Memlane-Signature"], secret=hook.secret)
        with pytest.raises(SignatureError, match="replay window"):
            verify(
                request.body,
                request.headers["Memlane-Signature"],
                secret=hook.secret,
                now=time.time() + 301,
            )


def test_an_erased_users_pending_deliveries_are_dropped(
    db_url: str, redis_url: str, fleet: Callable[..., WorkerProcess]
) -> None:
    with Receiver() as receiver:
        receiver.status_for_all = 503  # down: the user's events wait for their retries
        Webhooks(db_url).add(
            WebhookCreate(url=receiver.url, events=["memory.created", "job.done", "user.erased"])
        )
        fleet(db_url)
        with lane_for(db_url, redis_url) as lane:
            job_ids = lane.enqueue(said("c1", "gone", "I prefer green tea in the morning.")).job_ids
            wait_for_jobs(db_url, job_ids)
            wait_until(
                lambda: (
                    len(deliveries(db_url)) == 2
                    and all(d.attempts >= 1 for d in deliveries(db_url))
                ),
                "both events tried",
                timeout=120,  # a loaded machine; a lost send comes back after its lease
            )
            pending_ids = {d.event_id for d in deliveries(db_url)}
            assert {d.status for d in deliveries(db_url)} == {"pending"}
            lane.erase_user("gone")
        # a send that had started before the erasure committed cannot be called back: let
        # those answer (the receiver answers at once), then count what comes after
        time.sleep(1)
        before = len(receiver.received)
        receiver.status_for_all = None  # back up: only the erasure itself may arrive
        wait_until(lambda: len(receiver.accepted()) == 1, "the erasure delivered")
        time.sleep(3)  # several beat ticks and retry backoffs, to let a wrong send happen
        after = receiver.received[before:]
        left = deliveries(db_url)
    assert [(r.event["type"], r.event["user_id"], r.answered) for r in after] == [
        ("user.erased", "gone", 200)
    ]
    assert not pending_ids & {r.event["id"] for r in after}
    # the erasure's own delivery keeps no user id once told
    assert [(d.event_type, d.status, d.user_id) for d in left] == [
        ("user.erased", "delivered", None)
    ]


def test_dead_after_the_last_attempt_and_at_once_on_a_refusal(
    db_url: str, redis_url: str, fleet: Callable[..., WorkerProcess]
) -> None:
    with Receiver() as down, Receiver() as refusing:
        down.status_for_all, refusing.status_for_all = 500, 410
        hooks = Webhooks(db_url)
        broken = hooks.add(WebhookCreate(url=down.url, events=["job.done"]))
        gone = hooks.add(WebhookCreate(url=refusing.url, events=["job.done"]))
        fleet(db_url, webhook_max_attempts="3")
        with lane_for(db_url, redis_url) as lane:
            wait_for_jobs(db_url, lane.enqueue(said("c1", "u1", "I live in Lisbon.")).job_ids)
        wait_until(
            lambda: {d.status for d in deliveries(db_url)} == {"dead"}, "both deliveries dead"
        )
        time.sleep(1.5)  # no send after dead
        sends = len(down.received), len(refusing.received)
    by_hook = {d.webhook_id: d for d in deliveries(db_url, status="dead")}
    assert (by_hook[broken.id].attempts, by_hook[broken.id].response_status) == (3, 500)
    assert (by_hook[gone.id].attempts, by_hook[gone.id].response_status) == (1, 410)
    assert sends == (3, 1)
    shown = cli(db_url, "webhooks", "deliveries", "--status", "dead", "--json")
    assert shown.exit_code == 0, shown.output
    assert {row["webhook_id"] for row in json.loads(shown.output)} == {broken.id, gone.id}


def test_a_failed_job_is_told_with_its_id(
    db_url: str, redis_url: str, fleet: Callable[..., WorkerProcess]
) -> None:
    with Receiver() as receiver, LLMStub() as stub:
        stub.script([malformed("no JSON here, sorry")] * 3)  # every attempt of the job
        Webhooks(db_url).add(WebhookCreate(url=receiver.url, events=["job.done", "job.failed"]))
        model = {"llm_model": "openai/stub-model", "llm_api_base": stub.base_url}
        fleet(db_url, llm_api_key="x", **model)
        with lane_for(db_url, redis_url) as lane:
            job_ids = lane.enqueue(said("c1", "u1", "I live in Lisbon.")).job_ids
            assert wait_for_jobs(db_url, job_ids) == {job_ids[0]: "failed"}
        wait_until(lambda: len(receiver.accepted()) == 1, "the failure told")
    (told,) = receiver.accepted()
    assert (told.event["type"], told.event["data"]) == (
        "job.failed",
        {"job_id": job_ids[0], "conversation_id": "c1"},
    )


def test_a_timed_out_send_is_sent_again_and_the_event_id_tells_the_repeat(
    db_url: str, redis_url: str, fleet: Callable[..., WorkerProcess]
) -> None:
    with Receiver(slow_first_s=3) as receiver:
        Webhooks(db_url).add(WebhookCreate(url=receiver.url, events=["job.done"]))
        fleet(db_url, webhook_timeout_s="1")
        with lane_for(db_url, redis_url) as lane:
            wait_for_jobs(db_url, lane.enqueue(said("c1", "u1", "I live in Lisbon.")).job_ids)
        wait_until(lambda: deliveries(db_url)[0].status == "delivered", "delivered")
        (delivery,) = deliveries(db_url)
        sends = [r.event["id"] for r in receiver.received]
    # the receiver got it twice (the first answer came after the sender gave up): at
    # least once, and the same event id lets it drop the repeat
    assert sends == [delivery.event_id] * 2 and len(receiver.accepted()) == 1
    assert delivery.attempts == 2


def test_content_only_when_asked_read_at_send_time(
    db_url: str, redis_url: str, fleet: Callable[..., WorkerProcess]
) -> None:
    with Receiver() as receiver:
        Webhooks(db_url).add(
            WebhookCreate(url=receiver.url, events=["memory.created"], include_content=True)
        )
        fleet(db_url)
        with lane_for(db_url, redis_url) as lane:
            wait_for_jobs(
                db_url, lane.enqueue(said("c1", "u1", "I prefer green tea in the morning.")).job_ids
            )
        wait_until(lambda: len(receiver.accepted()) == 1, "the memory's event")
    data = receiver.accepted()[0].event["data"]
    assert "green tea" in data["content"]
