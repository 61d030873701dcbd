"""What an import keeps out, by the rules every other write follows: an active memory
that a stored memory of the user already says (the dedup rule: pipeline.dedup.plan;
active or forgotten, as `add` decides), one that repeats the text of another in the
same export, and one that a purge's fingerprint keeps out (a purged fact does not come
back with an export taken before the purge, nor do the export's episodes quote it: they
are redacted as a purge redacts stored ones). What it keeps out is left out with its
history, and counted."""

from __future__ import annotations

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
    said_purged: list[frozenset[str]] = []
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
            said_purged.append(words)
        else:
            texts.add(text)
            continue
        dropped.add(values["id"])
    if dropped:
        by_kind["memories"] = [v for v in by_kind["memories"] if v["id"] not in dropped]
        by_kind["memory_events"] = [
            v for v in by_kind["memory_events"] if v["memory_id"] not in dropped
        ]
    if said_purged:
        _redact_episodes(session, by_kind, user_id, said_purged)
    counts = {"duplicate_memories": duplicates, "purged_memories": purged}
    return {key: n for key, n in counts.items() if n}


def _redact_episodes(
    session: Session,
    by_kind: dict[str, list[dict[str, Any]]],
    user_id: str,
    said_purged: list[frozenset[str]],
) -> None:
    """The export's episodes redacted of the purged facts its memories said
    (store/memories/scrub.py, as a purge redacts stored ones): distinctive are the
    words neither the user's stored memories nor the imported ones hold. A redacted
    episode loses its vector; the import embeds it again."""
    imported = frozenset(w for v in by_kind["memories"] for w in keywords(v["content"]))
    facts = [
        RemovedFact(fact.keywords, fact.distinctive - imported)
        for fact in scrub.removed_facts(session, user_id, [sorted(w) for w in said_purged])
    ]
    for values in by_kind["episodes"]:
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
