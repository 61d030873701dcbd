"""Periodic recovery and upkeep: jobs whose broker message may be lost, conversation
tails that no 5th assistant message will ever trigger, retention (message texts and
context packs older than the operator keeps them), and erasure fences that have expired."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from memlane.config.settings import Settings
from memlane.models.db import unit_of_work
from memlane.models.store.conversations import jobs
from memlane.models.store.conversations import messages as conversations
from memlane.models.store.memories import memories
from memlane.models.store.users import erasures, retention
from memlane.pipeline.extraction.cadence import tail_windows
from memlane.workers.runner import utcnow


@dataclass
class SweepResult:
    extract: list[str] = field(default_factory=list)
    store: list[str] = field(default_factory=list)
    tails: int = 0
    messages_purged: int = 0
    packs_deleted: int = 0


def sweep(
    settings: Settings, *, now: datetime | None = None, queued_before: datetime | None = None
) -> SweepResult:
    """Release stuck jobs (queued again, so the next sweep waits a full period before
    touching them again) and create tail jobs for idle conversations. The caller
    publishes the ids. `queued_before` (a sweep asked for by hand: now; an embedded worker
    starting: when its process's facade was made) takes every job queued before then,
    not only those past the deadline: one whose message never reached the broker (it was
    down) is published at once; one published twice is claimed once (tasks are
    idempotent)."""
    now = now or utcnow()
    result = SweepResult()
    deadline = now - timedelta(seconds=settings.stuck_after_s)
    with unit_of_work(settings.resolved_database_url) as session:
        stuck = jobs.stuck(session, older_than=deadline, queued_before=queued_before)
        for job in stuck:
            (result.extract if job.stage == "extract" else result.store).append(job.id)
        jobs.release_stuck(session, [job.id for job in stuck], now=now)
        idle = conversations.idle_conversations(
            session, idle_since=now - timedelta(seconds=settings.idle_after_s)
        )
        for conversation in idle:
            windows = tail_windows(
                message_count=conversation.message_count,
                extracted_to_seq=conversation.extracted_to_seq,
                window=settings.extract_window,
            )
            created = jobs.create_jobs(
                session,
                conversation_id=conversation.id,
                user_id=conversation.user_id,
                windows=windows,
                now=now,
            )
            result.extract.extend(created)
            result.tails += len(created)
        erasures.lift_expired(session, now=now)
    if settings.message_retention_days is not None:
        with unit_of_work(settings.resolved_database_url) as session:
            cutoff = now - timedelta(days=settings.message_retention_days)
            result.messages_purged = retention.purge_messages(session, said_before=cutoff, now=now)
            retention.clear_extractions(session)
    if settings.pack_retention_days is not None:
        with unit_of_work(settings.resolved_database_url) as session:
            result.packs_deleted = retention.delete_packs(
                session, assembled_before=now - timedelta(days=settings.pack_retention_days)
            )
    return result


def move_accessed_at_forward(
    memory_ids: list[str], accessed_at: str | list[str], settings: Settings
) -> int:
    """Move accessed_at of the memories forward (never back). `accessed_at` is one ISO
    moment for all of them, or one per id (the batch form: ids coalesced over a short
    interval, each with the latest moment it was used at). One statement per moment, in
    one transaction."""
    if isinstance(accessed_at, str):
        groups = {accessed_at: memory_ids}
    else:
        if len(accessed_at) != len(memory_ids):
            raise ValueError(f"{len(memory_ids)} memory ids but {len(accessed_at)} access times")
        groups = {}
        for memory_id, moment in zip(memory_ids, accessed_at, strict=True):
            groups.setdefault(moment, []).append(memory_id)
    with unit_of_work(settings.resolved_database_url) as session:
        return sum(
            memories.record_access(session, ids, now=datetime.fromisoformat(moment))
            for moment, ids in groups.items()
        )
