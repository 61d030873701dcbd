"""Retention: message texts and context packs kept no longer than the operator's
MEMLANE_MESSAGE_RETENTION_DAYS / MEMLANE_PACK_RETENTION_DAYS, enforced by the sweep.

A purged message keeps its row (conversation, seq, role, external id, time) with its
text and its hash emptied and `purged_at` set: nothing of what was said stays, but its
position does, so a transcript sent again skips it as already stored (and nothing is
extracted twice), as it skips any stored message. A message is kept while a job that
is not done reads it, and while it has not been extracted at all. A job whose messages'
text went loses the extraction it kept (what the LLM read off the messages), however
long ago it finished.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import and_, delete, exists, null, select, update
from sqlalchemy.orm import Session

from memlane.models.tables import ContextPackRow, Conversation, Job, Message

BATCH = 5_000  # messages per statement: a large backlog is purged over several sweeps


def purge_messages(session: Session, *, said_before: datetime, now: datetime) -> int:
    """Empty the text of up to BATCH messages said before `said_before`; how many."""
    needed = exists().where(
        Job.conversation_id == Message.conversation_id,
        Job.status.in_(("queued", "running")),
        Job.window_start_seq <= Message.seq,
        Job.window_end_seq >= Message.seq,
    )
    extracted = exists().where(
        Conversation.id == Message.conversation_id,
        Conversation.extracted_to_seq >= Message.seq,
    )
    due = (
        select(Message.id)
        .where(
            and_(Message.purged_at.is_(None), Message.created_at < said_before),
            extracted,
            ~needed,
        )
        .order_by(Message.created_at)
        .limit(BATCH)
    )
    ids = list(session.scalars(due))
    if ids:
        session.execute(
            update(Message)
            .where(Message.id.in_(ids))
            .values(content="", content_sha256="", purged_at=now)
        )
    return len(ids)


def clear_extractions(session: Session) -> int:
    """Drop the extraction (the memories and episode as the LLM wrote them) of every job
    no stage is running or waiting to run whose messages' text retention has taken:
    what the LLM read off the messages goes with them, whenever the job finished (a
    done job keeps none: jobs.done drops it; a failed one keeps it for a retry). How
    many jobs."""
    text_gone = exists().where(
        Message.conversation_id == Job.conversation_id,
        Message.seq >= Job.window_start_seq,
        Message.seq <= Job.window_end_seq,
        Message.purged_at.is_not(None),
    )
    result = session.execute(
        update(Job)
        .where(
            Job.status.not_in(("queued", "running")),
            Job.extraction.is_not(None),
            text_gone,
        )
        .values(extraction=null())
        .execution_options(synchronize_session=False)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]


def delete_packs(session: Session, *, assembled_before: datetime) -> int:
    """Delete the context packs assembled before then; how many."""
    result = session.execute(
        delete(ContextPackRow).where(ContextPackRow.assembled_at < assembled_before)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]
