"""Memories: reads for dedup and management, hand-made changes, the keyword index."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import case, delete, func, select, text, update
from sqlalchemy.orm import Session

from memlane.models.schemas import MemoryCreate, MemoryPublic
from memlane.models.store import changes, refs
from memlane.models.tables import MemoryKeyword, MemoryRow
from memlane.pipeline.errors import ConflictError, NotFoundError
from memlane.pipeline.records import MemoryRecord, MemoryStatus, Tier
from memlane.pipeline.similarity import min_shared_keywords

if TYPE_CHECKING:  # the plan's shape only; the store runs no pipeline code
    from memlane.pipeline.dedup import DedupPlan

_MEMORY_NAMESPACE = uuid.UUID("0b7d3c64-1e2f-4a58-b6c9-7d8e9f0a1b2c")


def memory_id_for(job_id: str, index: int) -> str:
    """Deterministic ids for extracted memories: a redelivered store task that got past
    its claim would collide on the primary key instead of storing a copy."""
    return "mem_" + uuid.uuid5(_MEMORY_NAMESPACE, f"{job_id}\x00{index}").hex[:24]


def new_memory_id() -> str:
    return "mem_" + uuid.uuid4().hex[:24]


def to_record(row: MemoryRow, *, with_embedding: bool = False) -> MemoryRecord:
    return MemoryRecord(
        id=row.id,
        user_id=row.user_id,
        content=row.content,
        category=row.category,  # type: ignore[arg-type]
        importance=row.importance,
        confidence=row.confidence,
        tier=row.tier,  # type: ignore[arg-type]
        status=row.status,  # type: ignore[arg-type]
        sensitive=row.sensitive,
        expires_at=row.expires_at,
        keywords=frozenset(row.keywords or ()),
        access_count=row.access_count,
        created_at=row.created_at,
        confirmed_at=row.confirmed_at,
        accessed_at=row.accessed_at,
        ref=row.ref,
        embedding=tuple(row.embedding) if with_embedding and row.embedding is not None else None,
        source_conversation_id=row.source_conversation_id,
        source_job_id=row.source_job_id,
        evidence_seq=row.evidence_seq,
    )


_FIELDS_SET = frozenset(MemoryRecord.__pydantic_fields__)


def stored_record(fields: dict[str, Any]) -> MemoryRecord:
    """The MemoryRecord of a stored row's fields (all but `embedding`, which is None), as
    `model_construct` builds it at a sixth of its cost: rows come from memlane's own
    schema, so nothing is validated again, and the assembler's reads and a working set's
    load build thousands (tests/unit/test_assembly_records.py checks the two agree)."""
    memory = object.__new__(MemoryRecord)
    setattr_ = object.__setattr__
    setattr_(memory, "__dict__", {**fields, "embedding": None})
    # __pydantic_fields__: `model_fields` is a descriptor, and slower than all the rest
    setattr_(memory, "__pydantic_fields_set__", set(_FIELDS_SET))
    setattr_(memory, "__pydantic_extra__", None)
    setattr_(memory, "__pydantic_private__", None)
    return memory


def to_public(row: MemoryRow) -> MemoryPublic:
    return MemoryPublic(
        id=row.id,
        user_id=row.user_id,
        content=row.content,
        category=row.category,  # type: ignore[arg-type]
        importance=row.importance,
        confidence=row.confidence,
        tier=row.tier,  # type: ignore[arg-type]
        status=row.status,  # type: ignore[arg-type]
        sensitive=row.sensitive,
        expires_at=row.expires_at,
        access_count=row.access_count,
        created_at=row.created_at,
        confirmed_at=row.confirmed_at,
        accessed_at=row.accessed_at,
        ref=row.ref,
        source_conversation_id=row.source_conversation_id,
        source_job_id=row.source_job_id,
    )


def user_lock(session: Session, user_id: str) -> None:
    """Serialise writers of one user's memories until the transaction ends (a PostgreSQL
    transaction-level advisory lock). SQLite allows one writer at a time anyway."""
    if session.get_bind().dialect.name != "postgresql":
        return
    key = int.from_bytes(
        hashlib.blake2b(user_id.encode(), digest_size=8).digest(), "big", signed=True
    )
    session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})


def index_keywords(session: Session, memory_id: str, user_id: str, words: Iterable[str]) -> None:
    session.execute(delete(MemoryKeyword).where(MemoryKeyword.memory_id == memory_id))
    session.add_all(
        MemoryKeyword(memory_id=memory_id, keyword=word[:100], user_id=user_id)
        for word in sorted(set(words))
    )


def dedup_candidates(
    session: Session,
    user_id: str,
    keyword_sets: Sequence[frozenset[str]],
    *,
    threshold: float,
    limit: int = 200,
) -> list[MemoryRecord]:
    """Active and forgotten memories of the user that could be duplicates of (or conflict
    with) any of the given keyword sets, found through the inverted index (a forgotten
    one stays forgotten: pipeline.dedup rule 0).

    A memory sharing fewer than `min_shared_keywords(A)` keywords with every new set A can
    neither duplicate nor conflict with any of them (see memlane.pipeline.similarity), so it is
    not read.
    """
    sets = [s for s in keyword_sets if s]
    if not sets:
        return []
    words = sorted(set().union(*sets))
    min_overlap = min(min_shared_keywords(s, threshold=threshold) for s in sets)
    overlap = func.count(MemoryKeyword.keyword)
    ids = (
        select(MemoryKeyword.memory_id)
        .where(MemoryKeyword.user_id == user_id, MemoryKeyword.keyword.in_(words))
        .group_by(MemoryKeyword.memory_id)
        .having(overlap >= min_overlap)
        .order_by(overlap.desc(), MemoryKeyword.memory_id)
        .limit(limit)
    )
    rows = session.scalars(
        select(MemoryRow)
        .where(MemoryRow.id.in_(ids), MemoryRow.status.in_(("active", "deleted")))
        .order_by(MemoryRow.id)
    )
    return [to_record(row) for row in rows]


def add(
    session: Session,
    *,
    user_id: str,
    memory: MemoryCreate,
    keywords: frozenset[str],
    embedding: Sequence[float] | None,
    embedding_model: str | None,
    now: datetime,
    memory_id: str | None = None,
) -> MemoryPublic:
    row = MemoryRow(
        id=memory_id or new_memory_id(),
        user_id=user_id,
        content=memory.content,
        category=memory.category,
        importance=memory.importance,
        confidence=memory.confidence,
        tier=memory.tier,
        status="active",
        sensitive=memory.sensitive,
        expires_at=memory.expires_at,
        keywords=sorted(keywords),
        embedding=list(embedding) if embedding is not None else None,
        embedding_model=embedding_model if embedding is not None else None,
        embedding_dim=len(embedding) if embedding is not None else None,
        access_count=1,
        created_at=now,
        confirmed_at=now,
        accessed_at=now,
        ref=refs.allocate(session, user_id),
        change_seq=changes.stamp(session, user_id),
    )
    session.add(row)
    session.flush()
    index_keywords(session, row.id, user_id, keywords)
    return to_public(row)


def get(session: Session, user_id: str, memory_id: str) -> MemoryRow:
    """The user's memory by its id or its short id (`ref`, as contexts show it)."""
    ref = refs.parse(memory_id)
    if ref is not None:
        row = session.scalars(
            select(MemoryRow).where(MemoryRow.user_id == user_id, MemoryRow.ref == ref)
        ).first()
    else:
        row = session.get(MemoryRow, memory_id)
    if row is None or row.user_id != user_id:
        raise NotFoundError(f"user {user_id!r} has no memory {memory_id!r}")
    return row


def list_for_user(
    session: Session,
    user_id: str,
    *,
    status: MemoryStatus | None = "active",
    limit: int = 100,
    offset: int = 0,
) -> list[MemoryPublic]:
    query = (
        select(MemoryRow)
        .where(MemoryRow.user_id == user_id)
        .order_by(MemoryRow.importance.desc(), MemoryRow.created_at.desc(), MemoryRow.id)
        .limit(limit)
        .offset(offset)
    )
    if status is not None:
        query = query.where(MemoryRow.status == status)
    return [to_public(row) for row in session.scalars(query)]


def count_for_user(session: Session, user_id: str, *, status: MemoryStatus = "active") -> int:
    return int(
        session.scalar(
            select(func.count())
            .select_from(MemoryRow)
            .where(MemoryRow.user_id == user_id, MemoryRow.status == status)
        )
        or 0
    )


def _not_forgotten(row: MemoryRow, action: str) -> MemoryRow:
    """A forgotten memory takes no change but being restored or purged."""
    if row.status == "deleted":
        raise ConflictError(
            f"memory {row.id} is forgotten: restore it first (status active) to {action} it, "
            "or purge it"
        )
    return row


def set_tier(session: Session, user_id: str, memory_id: str, tier: Tier) -> MemoryPublic:
    row = _not_forgotten(get(session, user_id, memory_id), f"make it {tier}")
    row.tier = tier
    row.change_seq = changes.stamp(session, user_id)
    return to_public(row)


def set_status(
    session: Session, user_id: str, memory_id: str, status: MemoryStatus
) -> MemoryPublic:
    row = get(session, user_id, memory_id)
    if status not in ("active", "deleted"):  # restoring and forgetting again are allowed
        _not_forgotten(row, f"make it {status}")
    row.status = status
    row.change_seq = changes.stamp(session, user_id)
    return to_public(row)


def set_sensitive(session: Session, user_id: str, memory_id: str, sensitive: bool) -> MemoryPublic:
    row = _not_forgotten(get(session, user_id, memory_id), "mark it")
    row.sensitive = sensitive
    row.change_seq = changes.stamp(session, user_id)
    return to_public(row)


def purge(session: Session, user_id: str, memory_id: str) -> str:
    """Delete the memory for good, content, vector and keywords: unlike forgetting, it
    cannot be undone, and it leaves nothing to recognise the fact by, so a purged fact
    said again is learned again (forget it to keep it out). Returns its id."""
    row = get(session, user_id, memory_id)
    session.execute(delete(MemoryKeyword).where(MemoryKeyword.memory_id == row.id))
    session.delete(row)
    changes.removed(session, user_id, row.id)
    return row.id


def record_access(session: Session, memory_ids: Sequence[str], *, now: datetime) -> int:
    """Move accessed_at of memories that went into a context (never backwards): the
    `recent` strategy's order and diagnostics. `scored` never reads it."""
    if not memory_ids:
        return 0
    result = session.execute(
        update(MemoryRow)
        .where(MemoryRow.id.in_(list(memory_ids)), MemoryRow.accessed_at < now)
        .values(accessed_at=now)
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


def apply_plan(
    session: Session,
    plan: DedupPlan,
    *,
    user_id: str,
    job_id: str,
    conversation_id: str,
    vectors: Sequence[Sequence[float]],
    embedding_model: str,
    now: datetime,
    stated_at: Mapping[int, datetime] | None = None,
) -> list[str]:
    """Apply a dedup plan under the user's lock (`user_lock`). `vectors[i]` embeds
    sighting i; `stated_at` maps a message seq of the conversation to when it was said,
    so a memory is dated by the message that stated it (never later than `now`).
    Returns the ids of inserted memories, in plan order."""
    said = stated_at or {}
    inserted: list[str] = []
    first_ref = refs.allocate(session, user_id, len(plan.inserts)) if plan.inserts else 0
    number = changes.stamp(session, user_id)
    for position, planned in enumerate(plan.inserts):
        memory_id = memory_id_for(job_id, planned.sighting_index)
        vector = vectors[planned.sighting_index] if vectors else None
        row = MemoryRow(
            id=memory_id,
            user_id=user_id,
            content=planned.memory.content,
            category=planned.memory.category,
            importance=planned.memory.importance,
            confidence=planned.memory.confidence,
            tier="candidate",
            status=planned.status,
            sensitive=False,
            keywords=sorted(planned.keywords),
            embedding=list(vector) if vector is not None else None,
            embedding_model=embedding_model if vector is not None else None,
            embedding_dim=len(vector) if vector is not None else None,
            access_count=planned.access_count,
            created_at=min(now, said.get(planned.evidence_from_seq, now)),
            confirmed_at=min(now, said.get(planned.evidence_to_seq, now)),
            accessed_at=min(now, said.get(planned.evidence_to_seq, now)),
            ref=first_ref + position,
            change_seq=number,
            source_conversation_id=planned.conversation_id,
            source_job_id=job_id,
            source_from_seq=planned.evidence_from_seq,
            source_to_seq=planned.evidence_to_seq,
            evidence_seq=planned.evidence_to_seq,
        )
        session.add(row)
        inserted.append(memory_id)
    session.flush()
    for memory_id, planned in zip(inserted, plan.inserts, strict=True):
        index_keywords(session, memory_id, user_id, planned.keywords)
    for bump in plan.bumps:
        # Increments happen in SQL so concurrent readers never lose one; the times
        # never move backwards (a confirmation may come from an older conversation).
        said_at = bump.confirmed_at
        session.execute(
            update(MemoryRow)
            .where(MemoryRow.id == bump.memory_id, MemoryRow.user_id == user_id)
            .values(
                access_count=MemoryRow.access_count + bump.increment,
                confirmed_at=case(
                    (MemoryRow.confirmed_at < said_at, said_at), else_=MemoryRow.confirmed_at
                ),
                accessed_at=case(
                    (MemoryRow.accessed_at < said_at, said_at), else_=MemoryRow.accessed_at
                ),
                # The plan already took the max of the stored and the new values.
                importance=bump.importance,
                confidence=bump.confidence,
                evidence_seq=bump.evidence_seq,
                change_seq=number,
            )
        )
    for supersede in plan.supersedes:
        session.execute(
            update(MemoryRow)
            .where(MemoryRow.id == supersede.memory_id, MemoryRow.user_id == user_id)
            .values(
                status="superseded",
                superseded_by=inserted[supersede.by_insert],
                change_seq=number,
            )
        )
    return inserted


def promote_to_verified(session: Session, user_id: str, memory_ids: Sequence[str]) -> None:
    """Candidates that earned the verified tier (rule in memlane.pipeline.tiers)."""
    if memory_ids:
        session.execute(
            update(MemoryRow)
            .where(
                MemoryRow.id.in_(list(memory_ids)),
                MemoryRow.user_id == user_id,
                MemoryRow.tier == "candidate",
            )
            .values(tier="verified", change_seq=changes.stamp(session, user_id))
        )
