"""What an import keeps out, by the rules every other write follows: an active memory
that a stored memory of the user already says (the dedup rule: pipeline.dedup.plan;
active or forgotten, as `add` decides), one that repeats the text of another in the
same export, and one that a purge's fingerprint keeps out (a purged fact does not come
back with an export taken before the purge). What it keeps out is left out with its
history, and counted."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from memlane.models.store.memories import fingerprints
from memlane.models.store.reads import dedup as dedup_reads
from memlane.models.tables import MemoryRow
from memlane.pipeline.dedup.fingerprints import fingerprint, suppressed
from memlane.pipeline.dedup.keywords import keywords, normalise
from memlane.pipeline.dedup.plan import duplicate_of


def screen(
    session: Session,
    by_kind: dict[str, list[dict[str, Any]]],
    *,
    user_id: str,
    threshold: float,
    min_keywords: int,
) -> dict[str, int]:
    """Drop the active memories the rules keep out (and their history); how many, as
    `duplicate_memories` and `purged_memories`."""
    active = [v for v in by_kind["memories"] if v["status"] == "active"]
    if not active:
        return {}
    statements = [(v["content"], keywords(v["content"])) for v in active]
    known = []
    # A user with no memory yet (a move to a new deployment) has nothing to look up.
    holds = select(MemoryRow.id).where(
        MemoryRow.user_id == user_id, MemoryRow.status.in_(("active", "deleted"))
    )
    for start in range(0, len(statements) if session.scalar(holds.limit(1)) else 0, 500):
        known += dedup_reads.candidates(
            session,
            user_id,
            statements[start : start + 500],
            threshold=threshold,
            min_keywords=min_keywords,
        )
    secret, prints = fingerprints.read(session, user_id)
    texts: set[str] = set()
    dropped: set[str] = set()
    duplicates = purged = 0
    for values, (content, words) in zip(active, statements, strict=True):
        text = normalise(content)
        if text in texts or duplicate_of(
            content, words, known, threshold=threshold, min_keywords=min_keywords
        ):
            duplicates += 1
        elif (
            secret is not None
            and prints
            and suppressed(
                fingerprint(secret, content, words),
                prints,
                threshold=threshold,
                min_keywords=min_keywords,
            )
        ):
            purged += 1
        else:
            texts.add(text)
            continue
        dropped.add(values["id"])
    if dropped:
        by_kind["memories"] = [v for v in by_kind["memories"] if v["id"] not in dropped]
        by_kind["memory_events"] = [
            v for v in by_kind["memory_events"] if v["memory_id"] not in dropped
        ]
    counts = {"duplicate_memories": duplicates, "purged_memories": purged}
    return {key: n for key, n in counts.items() if n}
