"""Job rows: one per extraction window, claimed atomically by the stage that runs it."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import Table, bindparam, null, or_, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from memlane.models.schemas import JobPublic, JobStage, JobStatus
from memlane.models.tables import Conversation, Job
from memlane.pipeline.errors import MemlaneError, NotFoundError
from memlane.pipeline.extraction.cadence import WindowSpec

_JOB_NAMESPACE = uuid.UUID("6f1c2a51-8e0b-4b7e-9d5a-2f3c4b5a6d70")


def job_id_for(conversation_id: str, window_end_seq: int) -> str:
    """The same window of the same conversation always gets the same job id, so a re-sent
    transcript finds its jobs instead of creating new ones."""
    return "job_" + uuid.uuid5(_JOB_NAMESPACE, f"{conversation_id}\x00{window_end_seq}").hex[:24]


def create_jobs(
    session: Session,
    *,
    conversation_id: str,
    user_id: str,
    windows: Sequence[WindowSpec],
    now: datetime,
) -> list[str]:
    """Insert one queued job per window (memlane.pipeline.extraction.cadence), skipping
    those that exist, and move the conversation's extraction mark. Returns the new job ids."""
    if not windows:
        return []
    dialect = session.get_bind().dialect.name
    insert = pg_insert if dialect == "postgresql" else sqlite_insert
    rows = [
        {
            "id": job_id_for(conversation_id, window.end_seq),
            "user_id": user_id,
            "conversation_id": conversation_id,
            "status": "queued",
            "stage": "extract",
            "window_start_seq": window.start_seq,
            "window_end_seq": window.end_seq,
            "new_from_seq": window.new_from_seq,
            "attempts": 0,
            "created_at": now,
            "updated_at": now,
        }
        for window in windows
    ]
    # One statement for all the windows (an executemany SQLAlchemy sends as one INSERT,
    # compiled once: a .values() list would be compiled anew each time); those that exist
    # are skipped, so not returned.
    inserted = set(
        session.scalars(insert(Job).on_conflict_do_nothing().returning(Job.id), rows).all()
    )
    created = [row["id"] for row in rows if row["id"] in inserted]
    last_end = max(window.end_seq for window in windows)
    session.execute(
        update(Conversation)
        .where(Conversation.id == conversation_id, Conversation.extracted_to_seq < last_end)
        .values(extracted_to_seq=last_end)
    )
    return created


@dataclass(frozen=True, slots=True)
class Claimed:
    """What a stage reads of the job it claimed: the row's few columns it runs on, not
    the ORM object (whose construction and identity map cost more than the stage's
    other statements)."""

    id: str
    user_id: str
    conversation_id: str
    status: str
    window_start_seq: int
    window_end_seq: int
    new_from_seq: int
    attempts: int
    extraction: dict[str, Any] | None


_JOBS = cast(Table, Job.__table__)
_J = _JOBS.c
_AT = _J.updated_at.type
# The stages' statements, built once: building one (and its cache key) cost more CPU
# than sending it. CLAIM's parameters: job_id, b_stage, now, stale_before.
CLAIM = (
    update(_JOBS)
    .where(
        _J.id == bindparam("job_id"),
        _J.stage == bindparam("b_stage"),
        or_(
            _J.status == "queued",
            (_J.status == "running") & (_J.updated_at < bindparam("stale_before", type_=_AT)),
        ),
    )
    .values(
        status="running",
        attempts=_J.attempts + 1,
        started_at=bindparam("now", type_=_AT),
        updated_at=bindparam("now", type_=_AT),
    )
    .returning(*(_J[f.name] for f in fields(Claimed)))
)
# RELEASE's parameters: job_id, held_since (the claim's `now`, its started_at), now.
_RELEASE = (
    update(_JOBS)
    .where(
        _J.id == bindparam("job_id"),
        _J.status == "running",
        _J.started_at == bindparam("held_since", type_=_AT),
    )
    .values(
        status="queued",
        attempts=_J.attempts - 1,  # the outage was not the job's attempt
        updated_at=bindparam("now", type_=_AT),
    )
)
_RUNNING_STAGE = select(_J.status, _J.stage).where(_J.id == bindparam("job_id"))
_HAND_OVER = (
    update(_JOBS)
    .where(_J.id == bindparam("job_id"), _J.status == "running", _J.stage == "extract")
    .values(
        stage="store",
        status="queued",
        attempts=0,  # attempts count per stage: the store stage has its own retries
        last_error=None,
    )
)
# Done drops the extraction: it was kept only for the store stage, and what it holds (the
# memories and episode as the LLM wrote them) must not outlive a purge of them.
_DONE = (
    update(_JOBS)
    .where(_J.id == bindparam("job_id"))
    .values(
        status="done",
        extraction=null(),
        updated_at=bindparam("now", type_=_AT),
        finished_at=bindparam("now", type_=_AT),
    )
)


def claim(
    session: Session, job_id: str, *, stage: JobStage, now: datetime, stale_after: timedelta
) -> Claimed | None:
    """Atomically move a job of this stage from queued (or running but stale: its worker
    died) to running. None when the job is done, failed, at another stage or held by a
    live worker: a redelivered or duplicated task is then a no-op."""
    # One round trip: the conditional UPDATE returns the claimed row (none: not claimed).
    row = session.execute(
        CLAIM, {"job_id": job_id, "b_stage": stage, "now": now, "stale_before": now - stale_after}
    ).one_or_none()
    return None if row is None else Claimed(*row)


def release(session: Session, job_id: str, *, held_since: datetime, now: datetime) -> bool:
    """A claim whose stage lost the database back to queued, so the stage's retry (or any
    message of the job) can claim it at once instead of after the stuck sweep. Only the
    claim made at `held_since` (its started_at): a later claim, by the sweep's message or
    another worker, is not touched. False when there was nothing to release."""
    result = session.execute(_RELEASE, {"job_id": job_id, "held_since": held_since, "now": now})
    return bool(result.rowcount)  # type: ignore[attr-defined]


def running_stage(session: Session, job_id: str) -> tuple[str, str] | None:
    """The job's (status, stage), None when it is gone: what a stage checks again once it
    holds the user's lock."""
    row = session.execute(_RUNNING_STAGE, {"job_id": job_id}).one_or_none()
    return None if row is None else (row[0], row[1])


def load(session: Session, job_id: str) -> Job:
    job = session.get(Job, job_id)
    if job is None:
        raise NotFoundError(f"no job {job_id!r}")
    return job


def extracted(
    session: Session,
    job_id: str,
    *,
    extraction: dict[str, Any],
    model: str | None,
    tokens_in: int | None,
    tokens_out: int | None,
    cost_usd: float | None,
    latency_ms: float | None,
    now: datetime,
) -> bool:
    """The extract stage succeeded: keep its result on the row and hand over to store.
    One conditional UPDATE; False (nothing written) when the job is gone or no longer
    running its extract stage (another worker finished it)."""
    result = session.execute(
        _HAND_OVER,
        {
            "job_id": job_id,
            "extraction": extraction,
            "model": model,
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "cost_usd": cost_usd,
            "latency_ms": latency_ms,
            "updated_at": now,
        },
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def requeue(session: Session, job: Job, *, error: str, now: datetime) -> None:
    """A transient failure: the job waits for its retry, with the reason on the row."""
    job.status = "queued"
    job.last_error = error[:4000]
    job.updated_at = now


def fail(session: Session, job_id: str, *, error: str, now: datetime) -> None:
    """Out of retries, or bad data: failed for good, with its reason, until retried."""
    session.execute(
        update(Job)
        .where(Job.id == job_id, Job.status != "done")
        .values(status="failed", last_error=error[:4000], updated_at=now, finished_at=now)
    )


def done(session: Session, job_id: str, *, now: datetime, suppressed: int = 0) -> None:
    """The store stage succeeded, and the job's extraction is dropped; `suppressed`:
    extracted memories not stored (purged or forgotten facts said again)."""
    session.execute(_DONE, {"job_id": job_id, "now": now, "suppressed": suppressed})


def retry(session: Session, job_id: str, *, now: datetime, stuck_after: timedelta) -> Job:
    """A failed job back to queued at the stage it failed in (attempts start again), or
    at the extract stage when it keeps no extraction to store; a queued one untouched
    for `stuck_after` (its message lost, or never sent) too."""
    job = load(session, job_id)
    stranded = job.status == "queued" and job.updated_at < now - stuck_after
    if job.status != "failed" and not stranded:
        limit = f"{stuck_after.total_seconds():.0f} s (MEMLANE_STUCK_AFTER_S)"
        raise MemlaneError(
            f"job {job_id} is {job.status}; only a failed job can be retried, or a queued "
            f"one untouched for {limit}"
        )
    if job.stage == "store" and not job.extraction:
        # nothing kept to store (dropped when the job was done, or by retention with its
        # messages' text): extract again from what the messages still say
        job.stage = "extract"
    job.status = "queued"
    job.attempts = 0
    job.updated_at = now
    job.finished_at = None
    return job


def stuck(
    session: Session,
    *,
    older_than: datetime,
    queued_before: datetime | None = None,
    limit: int = 1000,
) -> list[Job]:
    """Jobs queued or running with no progress since `older_than`: their broker message
    may be lost (Redis restarted, a worker killed). With `queued_before`, also every job
    queued before then, however recent."""
    lost = Job.status.in_(("queued", "running")) & (Job.updated_at < older_than)
    if queued_before is not None:
        lost = lost | ((Job.status == "queued") & (Job.updated_at < queued_before))
    return list(
        session.scalars(select(Job).where(lost).order_by(Job.updated_at, Job.id).limit(limit))
    )


def touch(session: Session, job_ids: Sequence[str], *, now: datetime) -> None:
    if job_ids:
        session.execute(update(Job).where(Job.id.in_(job_ids)).values(updated_at=now))


def release_stuck(session: Session, job_ids: Sequence[str], *, now: datetime) -> None:
    """Stuck jobs back to queued, their clock restarted: a job running past the deadline
    (longer than any task may run) has lost its worker, and its republished message must
    be able to claim it."""
    if job_ids:
        session.execute(
            update(Job)
            .where(Job.id.in_(job_ids), Job.status.in_(("queued", "running")))
            .values(status="queued", updated_at=now)
        )


def to_public(job: Job) -> JobPublic:
    return JobPublic(
        id=job.id,
        user_id=job.user_id,
        conversation_id=job.conversation_id,
        status=job.status,  # type: ignore[arg-type]
        stage=job.stage,  # type: ignore[arg-type]
        window_start_seq=job.window_start_seq,
        window_end_seq=job.window_end_seq,
        new_from_seq=job.new_from_seq,
        attempts=job.attempts,
        last_error=job.last_error,
        model=job.model,
        tokens_in=job.tokens_in,
        tokens_out=job.tokens_out,
        cost_usd=job.cost_usd,
        latency_ms=job.latency_ms,
        suppressed=job.suppressed or 0,
        created_at=job.created_at,
        updated_at=job.updated_at,
        finished_at=job.finished_at,
    )


def list_jobs(
    session: Session,
    *,
    status: JobStatus | None = None,
    user_id: str | None = None,
    limit: int = 100,
) -> list[JobPublic]:
    query = select(Job).order_by(Job.created_at.desc(), Job.id).limit(limit)
    if status:
        query = query.where(Job.status == status)
    if user_id:
        query = query.where(Job.user_id == user_id)
    return [to_public(job) for job in session.scalars(query)]


def status_counts(session: Session, job_ids: Sequence[str]) -> dict[str, str]:
    if not job_ids:
        return {}
    rows = session.execute(select(Job.id, Job.status).where(Job.id.in_(job_ids)))
    return {row.id: row.status for row in rows}
