"""The inspector's jobs: queued, running and failed extraction jobs, each failure's
reason apart from the raw model answer the worker kept with it
(memlane.workers.runner appends it to the job's error)."""

from __future__ import annotations

from dataclasses import dataclass

from memlane.models.db import unit_of_work
from memlane.models.schemas import JobPublic
from memlane.models.store.conversations import jobs

RAW_MARK = "\n--- raw answer ---\n"  # how memlane.workers.runner joins them
BOARD_STATUSES = ("queued", "running", "failed", "done")


@dataclass(frozen=True, slots=True)
class JobLine:
    job: JobPublic
    reason: str | None  # the error, without the raw answer
    raw_answer: str | None  # what the model said, when the answer was unusable


def split_error(error: str | None) -> tuple[str | None, str | None]:
    if error is None:
        return None, None
    reason, mark, raw = error.partition(RAW_MARK)
    return reason, (raw if mark else None)


def job_lines(
    url: str, *, status: str | None, user_id: str | None = None, limit: int = 100
) -> list[JobLine]:
    with unit_of_work(url) as session:
        found = jobs.list_jobs(session, status=status, user_id=user_id, limit=limit)  # type: ignore[arg-type]
    return [JobLine(job, *split_error(job.last_error)) for job in found]
