"""Periodic recovery: jobs whose broker message may be lost, and conversation tails that
no 5th assistant message will ever trigger."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from config.settings import Settings
from models.db import unit_of_work
from models.store import conversations, jobs, memories
from pipeline.cadence import tail_windows
from workers.runner import utcnow


@dataclass
class SweepResult:
    extract: list[str] = field(default_factory=list)
    store: list[str] = field(default_factory=list)
    tails: int = 0


def sweep(settings: Settings, *, now: datetime | None = None) -> SweepResult:
    """Release stuck jobs (queued again, so the next sweep waits a full period before
    touching them again) and create tail jobs for idle conversations. The caller
    publishes the ids."""
    now = now or utcnow()
    result = SweepResult()
    with unit_of_work(settings.resolved_database_url) as session:
        stuck = jobs.stuck(session, older_than=now - timedelta(seconds=settings.stuck_after_s))
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
    return result


def record_access(memory_ids: list[str], accessed_at: str, settings: Settings) -> int:
    with unit_of_work(settings.resolved_database_url) as session:
        return memories.record_access(session, memory_ids, now=datetime.fromisoformat(accessed_at))
