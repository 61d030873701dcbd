"""A stage's claim of its job and the job's window of messages, in one round trip on
PostgreSQL: the claiming UPDATE in a WITH, the messages read beside what it returns
(two statements elsewhere: `jobs.claim`, then the conversation's read). Every job runs
both stages, so this saves a statement and its round trip on each."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import cast

from sqlalchemy import Table, func, select
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.orm import Session

from memlane.models.store.conversations import jobs
from memlane.models.store.conversations import messages as conversations
from memlane.models.store.conversations.jobs import Claimed
from memlane.models.tables import Message
from memlane.pipeline.records import StoredMessage

_MESSAGES = cast(Table, Message.__table__)
_M = _MESSAGES.c
_CLAIMED = jobs.CLAIM.cte("claimed")
_C = _CLAIMED.c
_WINDOW = (_M.conversation_id == _C.conversation_id) & _M.seq.between(
    _C.window_start_seq, _C.window_end_seq
)
_JOB = [_C[name] for name in Claimed.__dataclass_fields__ if name != "extraction"]
# extract: the claimed row beside each message of its window whose text is kept (none:
# one row of NULLs); its extraction, if any, is not the extract stage's to read
_WITH_TEXTS = (
    select(*_JOB, _M.seq, _M.role, _M.content, _M.created_at)
    .select_from(_CLAIMED.outerjoin(_MESSAGES, _WINDOW & _M.purged_at.is_(None)))
    .order_by(_M.seq)
)
# store: one row, the window's times as two arrays (the claimed row, with its
# extraction, is not repeated per message)
_WITH_TIMES = select(
    *_JOB,
    _C.extraction,
    select(func.array_agg(aggregate_order_by(_M.seq, _M.seq))).where(_WINDOW).scalar_subquery(),
    select(func.array_agg(aggregate_order_by(_M.created_at, _M.seq)))
    .where(_WINDOW)
    .scalar_subquery(),
)


def _params(job_id: str, stage: str, now: datetime, stale_after: timedelta) -> dict[str, object]:
    return {"job_id": job_id, "b_stage": stage, "now": now, "stale_before": now - stale_after}


def claim_with_texts(
    session: Session, job_id: str, *, now: datetime, stale_after: timedelta
) -> tuple[Claimed, list[StoredMessage]] | None:
    """`jobs.claim` of the extract stage, and the window's messages (those whose text
    retention has not taken) in order; None when not claimed."""
    if session.get_bind().dialect.name != "postgresql":
        job = jobs.claim(session, job_id, stage="extract", now=now, stale_after=stale_after)
        if job is None:
            return None
        window = conversations.messages_between(
            session, job.conversation_id, job.window_start_seq, job.window_end_seq
        )
        return job, window
    rows = session.execute(_WITH_TEXTS, _params(job_id, "extract", now, stale_after)).all()
    if not rows:
        return None
    job = Claimed(*rows[0][: len(_JOB)], None)  # type: ignore[call-arg]
    messages = [
        StoredMessage(
            conversation_id=job.conversation_id, seq=seq, role=role, content=content, created_at=at
        )
        for *_, seq, role, content, at in rows
        if seq is not None
    ]
    return job, messages


def claim_with_times(
    session: Session, job_id: str, *, now: datetime, stale_after: timedelta
) -> tuple[Claimed, dict[int, datetime]] | None:
    """`jobs.claim` of the store stage, and when each message of the window was said, by
    seq (`conversations.stated_times`); None when not claimed."""
    if session.get_bind().dialect.name != "postgresql":
        job = jobs.claim(session, job_id, stage="store", now=now, stale_after=stale_after)
        if job is None:
            return None
        times = conversations.stated_times(
            session, job.conversation_id, job.window_start_seq, job.window_end_seq
        )
        return job, times
    row = session.execute(_WITH_TIMES, _params(job_id, "store", now, stale_after)).one_or_none()
    if row is None:
        return None
    *claimed, seqs, times = row
    return Claimed(*claimed), dict(zip(seqs or (), times or (), strict=True))
