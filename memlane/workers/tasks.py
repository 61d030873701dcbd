"""Celery tasks: ids in, the shared stage runner, ids out. Task arguments are ids only,
so Redis and Flower never see user content."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from celery import Task
from celery.utils.time import get_exponential_backoff_interval
from sqlalchemy.exc import OperationalError

from memlane.config.settings import get_settings
from memlane.workers import reembed, runner, sweeper, webhooks
from memlane.workers.app import app
from memlane.workers.errors import TransientProviderError

# Only a lost database connection is retried by Celery itself; model errors are handled
# (and recorded on the job row) by the stage runner.
_DB_RETRY: dict[str, Any] = {
    "autoretry_for": (OperationalError,),
    "retry_backoff": True,
    "retry_jitter": True,
    "max_retries": 10,
}


# A stage that lost the database while holding its job retries until it is back (the
# backoff capped so the job resumes soon after), then releases its claim and runs again;
# past these retries (10+ minutes), the stuck sweep takes the job back.
_HELD_RETRY_MAX_S = 10
_HELD_MAX_RETRIES = 60

Stage = Callable[..., runner.StageOutcome]


def _run(task: Task, stage: Stage, job_id: str, held_since: str | None) -> str:
    held = datetime.fromisoformat(held_since) if held_since else None
    try:
        outcome = stage(job_id, get_settings(), held_since=held)
    except runner.DatabaseLost as lost:
        countdown = get_exponential_backoff_interval(
            factor=1, retries=task.request.retries, maximum=_HELD_RETRY_MAX_S, full_jitter=True
        )
        raise task.retry(
            kwargs={"held_since": lost.held_since.isoformat()},
            exc=lost,
            countdown=countdown,
            max_retries=_HELD_MAX_RETRIES,
        ) from lost
    if outcome.next == "retry":  # the job row was requeued: nothing held
        raise task.retry(kwargs={}, countdown=outcome.retry_in, max_retries=None)
    if outcome.next == "store":
        store.apply_async((job_id,))
    return outcome.next


@app.task(name="memlane.extract", bind=True, **_DB_RETRY)
def extract(self: Task, job_id: str, held_since: str | None = None) -> str:
    """held_since: set by the task's own retry after the database went away (DatabaseLost)."""
    return _run(self, runner.run_extract, job_id, held_since)


@app.task(name="memlane.store", bind=True, **_DB_RETRY)
def store(self: Task, job_id: str, held_since: str | None = None) -> str:
    return _run(self, runner.run_store, job_id, held_since)


@app.task(name="memlane.record_access", **_DB_RETRY)
def record_access(memory_ids: list[str], accessed_at: str | list[str]) -> int:
    """accessed_at: one ISO moment for all the ids, or one per id (the batch form)."""
    return sweeper.move_accessed_at_forward(memory_ids, accessed_at, get_settings())


@app.task(name="memlane.sweep", **_DB_RETRY)
def sweep() -> dict[str, int]:
    result = sweeper.sweep(get_settings())
    for job_id in result.extract:
        extract.apply_async((job_id,))
    for job_id in result.store:
        store.apply_async((job_id,))
    return {
        "extract": len(result.extract),
        "store": len(result.store),
        "tails": result.tails,
        "messages_purged": result.messages_purged,
        "packs_deleted": result.packs_deleted,
    }


@app.task(name="memlane.reembed_user", bind=True, **_DB_RETRY)
def reembed_user(self: Task, user_id: str, model: str, dim: int) -> dict[str, Any]:
    """Move one user's vectors to (model, dim); progress is read from the database."""
    settings = get_settings()
    try:
        outcome = reembed.run_reembed_user(user_id, model, dim, settings)
    except TransientProviderError as exc:  # the embedding API; what was done so far is kept
        raise self.retry(
            countdown=exc.retry_after or 10, max_retries=settings.llm_max_retries
        ) from exc
    return {"user_id": user_id, "embedded": outcome.embedded, "swapped": outcome.swapped}


@app.task(name="memlane.webhooks.dispatch", **_DB_RETRY)
def webhooks_dispatch() -> int:
    """Beat's tick: one send task per delivery due (each new event, a retry whose own
    message was lost, a delivery whose sender died)."""
    due = webhooks.publish_due(get_settings())
    for delivery_id, attempts in due:
        webhooks_deliver.apply_async((delivery_id, attempts))
    return len(due)


@app.task(name="memlane.webhooks.deliver", **_DB_RETRY)
def webhooks_deliver(delivery_id: int, attempts: int) -> str:
    """One send, if no other message's send took this attempt (`attempts`: the claim
    token); a failed one is sent again after its backoff, by this message's successor or
    by beat's tick, whichever comes first."""
    outcome = webhooks.deliver(delivery_id, attempts, get_settings())
    if outcome.status == "retry":
        webhooks_deliver.apply_async((delivery_id, outcome.attempts), countdown=outcome.retry_in)
    return outcome.status
