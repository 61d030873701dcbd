"""Hand-made changes of a memory (API, CLI, facade), each stamped on the user's change
feed and recorded in its history (store/memories/events.py) in the same transaction.

A change that changes nothing (pinning a pinned memory) takes no change number and
leaves no event.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session

from memlane.models.schemas import EventKind, MemoryEdit, MemoryPublic
from memlane.models.store.memories import events as memory_events
from memlane.models.store.memories import fingerprints, keyword_index, scrub
from memlane.models.store.memories.memories import get, user_lock
from memlane.models.store.reads import dedup as dedup_reads
from memlane.models.store.rows import to_public
from memlane.models.store.users import change_feed as changes
from memlane.models.tables import MemoryRow
from memlane.pipeline.dedup.keywords import keywords as keywords_of
from memlane.pipeline.dedup.keywords import statement_language
from memlane.pipeline.dedup.plan import duplicate_of
from memlane.pipeline.errors import ConflictError
from memlane.pipeline.metadata.values import Value, merge_metadata
from memlane.pipeline.records import MemoryStatus, Tier

PYTHON = "python"  # the actor of a facade called directly

_TIER_EVENTS: dict[str, EventKind] = {
    "pinned": "pinned",
    "verified": "verified",
    "candidate": "demoted",
}
_STATUS_EVENTS: dict[str, EventKind] = {
    "active": "restored",
    "quarantined": "quarantined",
    "deleted": "forgotten",
}
_TIER_RANK = {"candidate": 0, "verified": 1, "pinned": 2}


def _now(now: datetime | None) -> datetime:
    return now if now is not None else datetime.now(UTC)


def _not_forgotten(row: MemoryRow, action: str) -> MemoryRow:
    """A forgotten memory takes no change but being restored or purged."""
    if row.status == "deleted":
        raise ConflictError(
            f"memory {row.id} is forgotten: restore it first (status active) to {action} it, "
            "or purge it"
        )
    return row


def _changed(
    session: Session,
    row: MemoryRow,
    kind: EventKind,
    actor: str,
    now: datetime | None,
    detail: dict[str, Any] | None = None,
) -> MemoryPublic:
    row.change_seq = changes.stamp(session, row.user_id)
    memory_events.record(
        session,
        user_id=row.user_id,
        memory_id=row.id,
        kind=kind,
        actor=actor,
        at=_now(now),
        detail=detail,
    )
    return to_public(row)


def set_tier(
    session: Session,
    user_id: str,
    memory_id: str,
    tier: Tier,
    *,
    actor: str = PYTHON,
    now: datetime | None = None,
) -> MemoryPublic:
    row = _not_forgotten(get(session, user_id, memory_id), f"make it {tier}")
    if row.tier == tier:
        return to_public(row)
    was, row.tier = row.tier, tier
    return _changed(session, row, _TIER_EVENTS[tier], actor, now, {"from": was})


def set_status(
    session: Session,
    user_id: str,
    memory_id: str,
    status: MemoryStatus,
    *,
    actor: str = PYTHON,
    now: datetime | None = None,
) -> MemoryPublic:
    row = get(session, user_id, memory_id)
    if status not in ("active", "deleted"):  # restoring and forgetting again are allowed
        _not_forgotten(row, f"make it {status}")
    if row.status == status:
        return to_public(row)
    was, row.status = row.status, status
    kind = _STATUS_EVENTS.get(status, "superseded")
    return _changed(session, row, kind, actor, now, {"from": was})


def set_sensitive(
    session: Session,
    user_id: str,
    memory_id: str,
    sensitive: bool,
    *,
    actor: str = PYTHON,
    now: datetime | None = None,
) -> MemoryPublic:
    row = _not_forgotten(get(session, user_id, memory_id), "mark it")
    if row.sensitive == sensitive:
        return to_public(row)
    row.sensitive = sensitive
    kind: EventKind = "marked_sensitive" if sensitive else "unmarked_sensitive"
    return _changed(session, row, kind, actor, now)


def _shown(value: object) -> object:
    return value.isoformat() if isinstance(value, datetime) else value


def edit(
    session: Session,
    user_id: str,
    memory_id: str,
    correction: MemoryEdit,
    *,
    keywords: frozenset[str] | None = None,
    embedding: Sequence[float] | None = None,
    embedding_model: str | None = None,
    actor: str = PYTHON,
    now: datetime | None = None,
) -> MemoryPublic:
    """Apply a correction; a new content takes `keywords` and `embedding` (computed from
    it by the caller, outside the transaction). The `edited` event maps each changed
    field to [old, new]."""
    row = _not_forgotten(get(session, user_id, memory_id), "edit")
    given = correction.model_dump(include=correction.model_fields_set)
    found: dict[str, list[object]] = {}
    for field, value in given.items():
        if value is None and field != "expires_at":
            continue  # null keeps a field; only the expiry can be cleared
        old = getattr(row, field)
        if old != value:
            found[field] = [_shown(old), _shown(value)]
            setattr(row, field, value)
    if not found:
        return to_public(row)
    if "content" in found:
        if keywords is None:
            raise ValueError("a new content needs its keywords")
        row.keywords = sorted(keywords)
        row.language = statement_language(row.content, keywords)
        keyword_index.unindex(session, user_id, row.id)
        keyword_index.index(session, user_id, {row.id: keywords})
        row.embedding = list(embedding) if embedding is not None else None
        row.embedding_model = embedding_model if embedding is not None else None
        row.embedding_dim = len(embedding) if embedding is not None else None
        # a re-embedding in progress embedded the old content
        row.embedding_next = row.embedding_next_model = row.embedding_next_dim = None
    return _changed(session, row, "edited", actor, now, {"changes": found})


def refuse_duplicate(
    session: Session,
    user_id: str,
    memory_id: str,
    content: str,
    words: frozenset[str],
    *,
    threshold: float,
    min_keywords: int,
) -> None:
    """ConflictError when another active memory of the user already says `content` (the
    dedup rule, as `add` reads it): an edit does not make a second copy of a fact."""
    known = dedup_reads.candidates(
        session, user_id, [(content, words)], threshold=threshold, min_keywords=min_keywords
    )
    others = [k for k in known if k.id != memory_id and k.status == "active"]
    match = duplicate_of(content, words, others, threshold=threshold, min_keywords=min_keywords)
    if match is not None:
        raise ConflictError(
            f"memory {match.id} (#{match.ref}) already says this: keep that one and forget "
            "this one, or edit this one to say something else"
        )


def confirm(
    session: Session,
    user_id: str,
    memory_id: str,
    *,
    importance: float,
    confidence: float,
    tier: Tier,
    sensitive: bool,
    actor: str = PYTHON,
    now: datetime | None = None,
    metadata: Mapping[str, Value] | None = None,
) -> MemoryPublic:
    """A memory added by hand again (a duplicate by the dedup rule) confirms the stored
    one, as a conversation would: seen once more, confirmed now, importance and
    confidence raised to the max, tier raised if a higher one was asked, sensitive if
    asked, its metadata merged (pipeline.metadata.values.merge_metadata)."""
    row = _not_forgotten(get(session, user_id, memory_id), "confirm")
    at = _now(now)
    row.access_count += 1
    row.confirmed_at = max(row.confirmed_at, at)
    row.accessed_at = max(row.accessed_at, at)
    row.importance = max(row.importance, importance)
    row.confidence = max(row.confidence, confidence)
    detail: dict[str, Any] = {"by": "add"}
    if _TIER_RANK[tier] > _TIER_RANK[row.tier]:
        detail["tier"] = [row.tier, tier]
        row.tier = tier
    if sensitive and not row.sensitive:
        detail["sensitive"] = True
        row.sensitive = True
    if metadata:
        row.meta = merge_metadata(row.meta, metadata)
    return _changed(session, row, "confirmed", actor, at, detail)


def purge(
    session: Session,
    user_id: str,
    memory_id: str,
    *,
    actor: str = PYTHON,
    now: datetime | None = None,
    embed: scrub.Embed | None = None,
    embedding_model: str | None = None,
) -> str:
    """Delete the memory for good, content, vector, keywords and history (edits' events
    hold old contents): unlike forgetting, it cannot be undone. One content-free `purged`
    event stays, and a fingerprint (store/memories/fingerprints.py: keywords and text HMAC'd with
    the user's secret) by which the store stage keeps the fact from being learned again
    until the fingerprints are lifted. What was derived from it goes too
    (store/memories/scrub.py): episodes quoting it are redacted (and embedded again with
    `embed`), jobs' kept extractions lose it, context packs that showed it are deleted.
    Takes the user's lock first: a store job beside it cannot confirm the memory being
    deleted, nor save an episode the scrub has not seen. Returns its id."""
    user_lock(session, user_id)
    row = get(session, user_id, memory_id)
    words = row.keywords or sorted(keywords_of(row.content))
    fingerprints.keep(session, user_id, row.id, row.content, words, now=_now(now))
    keyword_index.unindex(session, user_id, row.id)
    session.delete(row)
    changes.removed(session, user_id, row.id)
    memory_events.forget_history(session, user_id, row.id)
    memory_events.record(
        session, user_id=user_id, memory_id=row.id, kind="purged", actor=actor, at=_now(now)
    )
    session.flush()
    facts = scrub.removed_facts(session, user_id, [words])
    scrub.scrub(
        session,
        user_id,
        facts,
        item_ids=[row.id],
        embed=embed,
        embedding_model=embedding_model,
    )
    return row.id
