"""Where a memory came from: its source conversation and the message range the
extraction read, with the messages themselves (those retention has not purged)."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import select

from memlane.models.db import unit_of_work
from memlane.models.store.conversations.messages import messages_between
from memlane.models.tables import Conversation, MemoryRow
from memlane.pipeline.records import StoredMessage

# A memory's source window beyond this many messages is shown cut (the page stays light);
# AROUND messages either side of it are shown too, for what led to it.
MAX_MESSAGES = 60
AROUND = 2


@dataclass(frozen=True, slots=True)
class Source:
    conversation_id: str | None
    job_id: str | None
    from_seq: int | None
    to_seq: int | None
    evidence_seq: int | None
    messages: list[StoredMessage] = field(default_factory=list)
    conversation_known: bool = False


def memory_source(url: str, user_id: str, memory_id: str) -> Source:
    """The memory's source (a memory added by hand has none: every field None)."""
    with unit_of_work(url) as session:
        row = session.execute(
            select(
                MemoryRow.source_conversation_id,
                MemoryRow.source_job_id,
                MemoryRow.source_from_seq,
                MemoryRow.source_to_seq,
                MemoryRow.evidence_seq,
            ).where(MemoryRow.user_id == user_id, MemoryRow.id == memory_id)
        ).one_or_none()
        if row is None or row[0] is None:
            return Source(None, None, None, None, None)
        conversation_id, job_id, start, end, evidence = row
        known = (
            session.scalar(
                select(Conversation.id).where(
                    Conversation.id == conversation_id, Conversation.user_id == user_id
                )
            )
            is not None
        )
        messages: list[StoredMessage] = []
        if known and start is not None and end is not None:
            low = max(start, end - MAX_MESSAGES + 1, 0) - AROUND
            messages = messages_between(session, str(conversation_id), max(low, 0), end + AROUND)
    return Source(conversation_id, job_id, start, end, evidence, messages, known)
