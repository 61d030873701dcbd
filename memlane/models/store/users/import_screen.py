"""What an import keeps out, by the rules every other write follows: an active memory
that a stored memory of the user already says (the dedup rule: pipeline.dedup.plan;
active or forgotten, as `add` decides), one that repeats the text of another in the
same export, and one that a purge's fingerprint keeps out (a purged fact does not come
back with an export taken before the purge). What it keeps out is left out with its
history, and counted."""

from __future__ import annotations

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
    active: list[tuple[str, str]],
    *,
    user_id: str,
    threshold: float,
    min_keywords: int,
) -> tuple[set[str], dict[str, int]]:
    """The active memories (id, content, in the export's order) the rules keep out (to
    leave out with their history), and how many, as `duplicate_memories` and
    `purged_memories`. Keywords are made again where needed, not held for the whole
    export."""
    if not active:
        return set(), {}
    known = []
    # A user with no memory yet (a move to a new deployment) has nothing to look up.
    holds = select(MemoryRow.id).where(
        MemoryRow.user_id == user_id, MemoryRow.status.in_(("active", "deleted"))
    )
    for start in range(0, len(active) if session.scalar(holds.limit(1)) else 0, 500):
        known += dedup_reads.candidates(
            session,
            user_id,
            [(content, keywords(content)) for _, content in active[start : start + 500]],
            threshold=threshold,
            min_keywords=min_keywords,
        )
    secret, prints = fingerprints.read(session, user_id)
    texts: set[str] = set()
    dropped: set[str] = set()
    duplicates = purged = 0
    for memory_id, content in active:
        words = keywords(content)
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
        dropped.add(memory_id)
    counts = {"duplicate_memories": duplicates, "purged_memories": purged}
    return dropped, {key: n for key, n in counts.items() if n}
