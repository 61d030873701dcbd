"""Celery tasks: ids in, the shared stage runner, ids out. Task arguments are ids only,
so Redis and Flower never see user content."""

from __future__ import annotations

from typing import Any

from celery import Task
from sqlalchemy.exc import OperationalError

from memlane.config.settings import get_settings
from memlane.workers import reembed, runner, sweeper
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


def _follow(task: Task, outcome: runner.StageOutcome, job_id: str) -> str:
    if outcome.next == "retry":
        raise task.retry(countdown=outcome.retry_in, max_retries=None)
    if outcome.next == "store":
        store.apply_async((job_id,))
    return outcome.next


@app.task(name="memlane.extract", bind=True, **_DB_RETRY)
def extract(self: Task, job_id: str) -> str:
    return _follow(self, runner.run_extract(job_id, get_settings()), job_id)


@app.task(name="memlane.store", bind=True, **_DB_RETRY)
def store(self: Task, job_id: str) -> str:
    return _follow(self, runner.run_store(job_id, get_settings()), job_id)


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
