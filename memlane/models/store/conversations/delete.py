"""Deleting one conversation ("delete this chat"): its messages, jobs and episodes, and
what was learned only from it, in one transaction under the user's lock.

A memory's evidence is read from its history (store/memories/events.py): its `created`
and `confirmed` events name the conversation whose messages stated it (a confirmation
by hand names none and counts as evidence of its own). Then, for the memories the
conversation evidenced:
- one with no other evidence is deleted as a purge deletes (content, vector, keywords,
  history; one content-free `purged` event stays), forgotten ones too, and leaves a
  purge's fingerprint (store/memories/fingerprints.py), so a later conversation, merge
  or import does not bring the fact back until the fingerprints are lifted;
- one with other evidence stays, without this conversation's: its confirmations from it
  are taken off `access_count`, and if it was stated here first its source becomes
  unknown (`evidence_removed` event);
- a memory superseded by a deleted one is active again (`restored`), since what
  superseded it is gone;
- what was derived from the deleted memories elsewhere goes as a purge's does
  (store/memories/scrub.py): other conversations' episodes quoting them are redacted,
  jobs' kept extractions lose them, and the user's context packs that showed a deleted
  memory or episode (or whose query quotes a deleted memory) are deleted.
Memories made before history was kept (migration 0007) have a `created` event only: one
stated here counts as learned here alone.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from memlane.models.schemas import EventKind
from memlane.models.store.memories import events as memory_events
from memlane.models.store.memories import fingerprints, keyword_index, scrub
from memlane.models.store.memories.memories import user_lock
from memlane.models.store.users import change_feed as changes
from memlane.models.tables import (
    Conversation,
    EpisodeRow,
    Job,
    MemoryEventRow,
    MemoryRow,
    Message,
)
from memlane.pipeline.dedup.keywords import keywords as keywords_of
from memlane.pipeline.errors import NotFoundError

_EVIDENCE = ("created", "confirmed")


def delete_conversation(
    session: Session,
    user_id: str,
    conversation_id: str,
    *,
    actor: str,
    now: datetime,
    embed: scrub.Embed | None = None,
    embedding_model: str | None = None,
) -> dict[str, int]:
    """Delete the user's conversation and what was learned only from it; what was done,
    counted (NotFoundError when the user has no such conversation)."""
    user_lock(session, user_id)  # the store stage's lock: no job of it lands meanwhile
    conversation = session.get(Conversation, conversation_id)
    if conversation is None or conversation.user_id != user_id:
        raise NotFoundError(f"user {user_id!r} has no conversation {conversation_id!r}")
    here, elsewhere = _evidence(session, user_id, conversation_id)
    gone: list[str] = []
    kept: list[str] = []
    rows = session.scalars(
        select(MemoryRow).where(MemoryRow.user_id == user_id, MemoryRow.id.in_(sorted(here)))
    ).all()
    for row in rows:
        if row.id in elsewhere:
            _keep_without(session, row, conversation_id, here[row.id], elsewhere[row.id])
            kept.append(row.id)
        else:
            gone.append(row.id)
    said = {row.id: (row.content, row.keywords or sorted(keywords_of(row.content))) for row in rows}
    for memory_id in gone:
        content, words = said[memory_id]
        fingerprints.keep(session, user_id, memory_id, content, words, now=now)
    restored = _forget_memories(session, user_id, gone)
    # the kept memories' evidence from here goes (their `evidence_removed` event says so)
    session.execute(
        delete(MemoryEventRow).where(
            MemoryEventRow.user_id == user_id,
            MemoryEventRow.conversation_id == conversation_id,
            MemoryEventRow.memory_id.in_(kept),
        )
    )
    episodes = session.scalars(
        select(EpisodeRow.id).where(
            EpisodeRow.user_id == user_id, EpisodeRow.conversation_id == conversation_id
        )
    ).all()
    for episode_id in episodes:
        changes.removed(session, user_id, episode_id)
    session.execute(delete(EpisodeRow).where(EpisodeRow.id.in_(episodes)))
    events: list[tuple[str, EventKind, dict[str, Any] | None]] = [
        (memory_id, "purged", {"with_conversation": conversation_id}) for memory_id in gone
    ]
    events += [(m, "evidence_removed", {"conversation_id": conversation_id}) for m in kept]
    events += [(m, "restored", {"superseded_by": by}) for m, by in restored]
    memory_events.record_many(session, user_id=user_id, actor=actor, at=now, events=events)
    messages = _count(session, delete(Message).where(Message.conversation_id == conversation_id))
    jobs = _count(session, delete(Job).where(Job.conversation_id == conversation_id))
    session.delete(conversation)
    session.flush()
    scrubbed = scrub.scrub(
        session,
        user_id,
        scrub.removed_facts(session, user_id, [said[memory_id][1] for memory_id in gone]),
        item_ids=[*gone, *episodes],
        embed=embed,
        embedding_model=embedding_model,
    )
    return {
        "messages": messages,
        "jobs": jobs,
        "episodes": len(episodes),
        "memories_deleted": len(gone),
        "memories_kept": len(kept),
        "memories_restored": len(restored),
        "episodes_redacted": len(scrubbed.episodes),
        "context_packs": scrubbed.packs,
    }


def _evidence(
    session: Session, user_id: str, conversation_id: str
) -> tuple[dict[str, int], dict[str, int]]:
    """For each memory this conversation evidenced: the evidence it gave (its created
    event counts 1 + nothing else known; each confirmation its increment), and the
    evidence other sources gave the same memories."""
    touched = select(MemoryEventRow.memory_id).where(
        MemoryEventRow.user_id == user_id,
        MemoryEventRow.conversation_id == conversation_id,
        MemoryEventRow.kind.in_(_EVIDENCE),
    )
    here: dict[str, int] = defaultdict(int)
    elsewhere: dict[str, int] = defaultdict(int)
    events = session.execute(
        select(
            MemoryEventRow.memory_id,
            MemoryEventRow.conversation_id,
            MemoryEventRow.kind,
            MemoryEventRow.detail,
        ).where(
            MemoryEventRow.user_id == user_id,
            MemoryEventRow.memory_id.in_(touched),
            MemoryEventRow.kind.in_(_EVIDENCE),
        )
    )
    for memory_id, source, kind, detail in events:
        weight = int((detail or {}).get("increment", 1)) if kind == "confirmed" else 1
        (here if source == conversation_id else elsewhere)[memory_id] += weight
    return dict(here), dict(elsewhere)


def _keep_without(
    session: Session, row: MemoryRow, conversation_id: str, given: int, other: int
) -> None:
    """The memory without this conversation's evidence: seen as often as the rest saw
    it (at least once)."""
    row.access_count = max(1, min(row.access_count - given, other))
    if row.source_conversation_id == conversation_id:
        row.source_conversation_id = row.source_job_id = None
        row.source_from_seq = row.source_to_seq = row.evidence_seq = None
    row.change_seq = changes.stamp(session, row.user_id)


def _forget_memories(
    session: Session, user_id: str, memory_ids: list[str]
) -> list[tuple[str, str]]:
    """Delete the memories (as a purge does) and make active again those they
    superseded; the (restored, superseded_by) pairs."""
    if not memory_ids:
        return []
    restored = session.execute(
        select(MemoryRow.id, MemoryRow.superseded_by).where(
            MemoryRow.user_id == user_id,
            MemoryRow.status == "superseded",
            MemoryRow.superseded_by.in_(memory_ids),
            MemoryRow.id.not_in(memory_ids),
        )
    ).all()
    if restored:
        session.execute(
            update(MemoryRow)
            .where(MemoryRow.id.in_([memory_id for memory_id, _ in restored]))
            .values(status="active", superseded_by=None, change_seq=changes.stamp(session, user_id))
        )
    for memory_id in memory_ids:
        keyword_index.unindex(session, user_id, memory_id)
    session.execute(delete(MemoryRow).where(MemoryRow.id.in_(memory_ids)))
    for memory_id in memory_ids:
        changes.removed(session, user_id, memory_id)
        memory_events.forget_history(session, user_id, memory_id)
    return [(memory_id, str(by)) for memory_id, by in restored]


def _count(session: Session, statement: Any) -> int:
    return int(session.execute(statement).rowcount)  # type: ignore[attr-defined]
