"""What an import keeps out, by the rules every other write follows: an active memory
that a stored memory of the user already says (the dedup rule: pipeline.dedup.plan;
active or forgotten, as `add` decides), one that repeats the text of another in the
same export, and one that a purge's fingerprint keeps out (a purged fact does not come
back with an export taken before the purge, nor do the export's episodes quote it: they
are redacted as a purge redacts stored ones). What it keeps out is left out with its
history, and counted."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from memlane.models.store.memories import fingerprints, scrub
from memlane.models.store.reads import dedup as dedup_reads
from memlane.models.tables import MemoryRow
from memlane.pipeline.dedup.fingerprints import fingerprint, suppressed
from memlane.pipeline.dedup.keywords import keywords, normalise
from memlane.pipeline.dedup.plan import duplicate_of
from memlane.pipeline.dedup.redaction import EpisodeText, RemovedFact, redact_episode


@dataclass
class Screened:
    dropped: set[str]  # the active memories to leave out, with their history
    counts: dict[str, int]  # duplicate_memories, purged_memories
    purged_facts: list[RemovedFact]  # what the export's episodes are redacted of (redact)


def screen(
    session: Session,
    active: list[tuple[str, str]],
    *,
    user_id: str,
    threshold: float,
    min_keywords: int,
) -> Screened:
    """The active memories (id, content, in the export's order) the rules keep out (to
    leave out with their history), and how many, as `duplicate_memories` and
    `purged_memories`. Keywords are made again where needed, not held for the whole
    export."""
    if not active:
        return Screened(set(), {}, [])
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
    said_purged: list[frozenset[str]] = []
    imported: set[str] = set()  # the words of the active memories the import keeps
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
            said_purged.append(words)
        else:
            texts.add(text)
            imported.update(words)
            continue
        dropped.add(memory_id)
    counts = {"duplicate_memories": duplicates, "purged_memories": purged}
    facts = _purged_facts(session, user_id, said_purged, imported) if said_purged else []
    return Screened(dropped, {key: n for key, n in counts.items() if n}, facts)


def _purged_facts(
    session: Session, user_id: str, said_purged: list[frozenset[str]], imported: set[str]
) -> list[RemovedFact]:
    """The purged facts the export's memories said, to redact its episodes of
    (store/memories/scrub.py, as a purge redacts stored ones): distinctive are the words
    neither the user's stored memories nor the active memories imported hold."""
    return [
        RemovedFact(fact.keywords, fact.distinctive - imported)
        for fact in scrub.removed_facts(session, user_id, [sorted(w) for w in said_purged])
    ]


def redact(values: dict[str, Any], facts: list[RemovedFact]) -> None:
    """An exported episode's row redacted of `facts` in place; a redacted episode loses
    its vector, and the import embeds it again."""
    before = EpisodeText(
        values["summary"], tuple(values.get("topics") or ()), values.get("outcome")
    )
    after = redact_episode(before, facts)
    if after is not None:
        values.update(
            summary=after.summary,
            topics=list(after.topics),
            outcome=after.outcome,
            embedding=None,
            embedding_model=None,
            embedding_dim=None,
        )
