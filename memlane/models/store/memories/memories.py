"""Memories: reads for management, inserts (by hand or a store job's dedup plan). Hand-made
changes are in store/memories/edits.py; every write here records its events in the
memory's history (store/memories/events.py)."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Table, bindparam, case, func, insert, select, text, update
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import BindParameter

from memlane.models.schemas import EventKind, MemoryCreate, MemoryPublic
from memlane.models.store import metadata_sql
from memlane.models.store.memories import events as memory_events
from memlane.models.store.memories import keyword_index, refs
from memlane.models.store.memories.scopes import seen_by
from memlane.models.store.rows import to_public
from memlane.models.store.users import change_feed as changes
from memlane.models.tables import MemoryRow
from memlane.pipeline.dedup.keywords import statement_language
from memlane.pipeline.errors import NotFoundError
from memlane.pipeline.metadata.filters import Filter
from memlane.pipeline.records import MemoryStatus

if TYPE_CHECKING:  # the plan's type only: the store applies a plan, dedup.plan makes it
    from memlane.pipeline.dedup.plan import DedupPlan

_MEMORIES = cast(Table, MemoryRow.__table__)
_INSERT = insert(_MEMORIES)
_M = _MEMORIES.c
_SAID_AT: BindParameter[datetime] = bindparam("b_said_at", type_=_M.confirmed_at.type)
# A plan's bumps: one statement, built once, executed for each bump (apply_plan)
_BUMP = (
    update(_MEMORIES)
    .where(_M.id == bindparam("b_id"), _M.user_id == bindparam("b_user_id"))
    .values(
        access_count=_M.access_count + bindparam("b_increment"),
        confirmed_at=case((_M.confirmed_at < _SAID_AT, _SAID_AT), else_=_M.confirmed_at),
        accessed_at=case((_M.accessed_at < _SAID_AT, _SAID_AT), else_=_M.accessed_at),
        importance=bindparam("b_importance"),
        confidence=bindparam("b_confidence"),
        evidence_seq=bindparam("b_evidence_seq"),
        change_seq=bindparam("b_change_seq"),
    )
)
_MEMORY_NAMESPACE = uuid.UUID("0b7d3c64-1e2f-4a58-b6c9-7d8e9f0a1b2c")


def memory_id_for(job_id: str, index: int) -> str:
    """Deterministic ids for extracted memories: a redelivered store task that got past
    its claim would collide on the primary key instead of storing a copy."""
    return "mem_" + uuid.uuid5(_MEMORY_NAMESPACE, f"{job_id}\x00{index}").hex[:24]


def new_memory_id() -> str:
    return "mem_" + uuid.uuid4().hex[:24]


_LOCK = text("SELECT pg_advisory_xact_lock(:key)")


def user_lock(session: Session, user_id: str) -> None:
    """Serialise writers of one user's memories until the transaction ends (a PostgreSQL
    transaction-level advisory lock). SQLite allows one writer at a time anyway."""
    if session.get_bind().dialect.name != "postgresql":
        return
    session.execute(_LOCK, {"key": user_lock_key(user_id)})


def user_lock_key(user_id: str) -> int:
    """The user's advisory lock key (a signed 64-bit integer)."""
    return int.from_bytes(
        hashlib.blake2b(user_id.encode(), digest_size=8).digest(), "big", signed=True
    )


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
    actor: str = "python",
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
        language=statement_language(memory.content, keywords),
        embedding=list(embedding) if embedding is not None else None,
        embedding_model=embedding_model if embedding is not None else None,
        embedding_dim=len(embedding) if embedding is not None else None,
        access_count=1,
        created_at=now,
        confirmed_at=now,
        accessed_at=now,
        ref=refs.allocate(session, user_id),
        change_seq=changes.stamp(session, user_id),
        meta=dict(memory.metadata),
    )
    session.add(row)
    session.flush()
    keyword_index.index(session, user_id, {row.id: keywords})
    memory_events.record(
        session, user_id=user_id, memory_id=row.id, kind="created", actor=actor, at=now
    )
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
    agent_id: str | None = None,
    where: Filter | None = None,
) -> list[MemoryPublic]:
    """The user's memories `agent_id` sees (the shared ones and its own; None: the
    shared ones), most important first; `where`: those of metadata it passes."""
    query = (
        select(MemoryRow)
        .where(MemoryRow.user_id == user_id, seen_by(MemoryRow.agent_id, agent_id))
        .order_by(MemoryRow.importance.desc(), MemoryRow.created_at.desc(), MemoryRow.id)
        .limit(limit)
        .offset(offset)
    )
    if status is not None:
        query = query.where(MemoryRow.status == status)
    if where is not None:
        dialect = session.get_bind().dialect.name
        query = query.where(metadata_sql.condition(MemoryRow.meta, where, dialect=dialect))
    return [to_public(row) for row in session.scalars(query)]


def page_for_user(
    session: Session,
    user_id: str,
    *,
    status: MemoryStatus | None = "active",
    limit: int = 100,
    before_ref: int | None = None,
    agent_id: str | None = None,
    where: Filter | None = None,
) -> list[MemoryPublic]:
    """The user's memories `agent_id` sees (as `list_for_user`) newest first (by `ref`,
    which never changes and is never reused), those older than `before_ref` when given: a
    keyset page, exact however the store changes between pages (a memory's importance
    may, its ref may not)."""
    query = (
        select(MemoryRow)
        .where(MemoryRow.user_id == user_id, seen_by(MemoryRow.agent_id, agent_id))
        .order_by(MemoryRow.ref.desc())
        .limit(limit)
    )
    if before_ref is not None:
        query = query.where(MemoryRow.ref < before_ref)
    if status is not None:
        query = query.where(MemoryRow.status == status)
    if where is not None:
        dialect = session.get_bind().dialect.name
        query = query.where(metadata_sql.condition(MemoryRow.meta, where, dialect=dialect))
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
    first_ref: int | None = None,
    agents: Sequence[str | None] = (),
) -> list[str]:
    """Apply a dedup plan under the user's lock (`user_lock`). `agents[i]`: the agent
    insert i belongs to (pipeline.scope.insert_scope; none given: all shared). `vectors[i]` embeds
    sighting i; `stated_at` maps a message seq of the conversation to when it was said,
    so a memory is dated by the message that stated it (never later than `now`);
    `first_ref`: the first of len(plan.inserts) refs the caller allocated (else they are
    allocated here). Returns the ids of inserted memories, in plan order."""
    said = stated_at or {}
    if first_ref is None:
        first_ref = refs.allocate(session, user_id, len(plan.inserts)) if plan.inserts else 0
    number = changes.stamp(session, user_id)
    rows: list[dict[str, Any]] = []
    for position, planned in enumerate(plan.inserts):
        vector = vectors[planned.sighting_index] if vectors else None
        rows.append(
            {
                "id": memory_id_for(job_id, planned.sighting_index),
                "user_id": user_id,
                "content": planned.memory.content,
                "category": planned.memory.category,
                "importance": planned.memory.importance,
                "confidence": planned.memory.confidence,
                "tier": "candidate",
                "status": planned.status,
                "sensitive": False,
                "keywords": sorted(planned.keywords),
                "language": statement_language(planned.memory.content, planned.keywords),
                "embedding": list(vector) if vector is not None else None,
                "embedding_model": embedding_model if vector is not None else None,
                "embedding_dim": len(vector) if vector is not None else None,
                "access_count": planned.access_count,
                "created_at": min(now, said.get(planned.evidence_from_seq, now)),
                "confirmed_at": min(now, said.get(planned.evidence_to_seq, now)),
                "accessed_at": min(now, said.get(planned.evidence_to_seq, now)),
                "ref": first_ref + position,
                "change_seq": number,
                "source_conversation_id": planned.conversation_id,
                "source_job_id": job_id,
                "source_from_seq": planned.evidence_from_seq,
                "source_to_seq": planned.evidence_to_seq,
                "evidence_seq": planned.evidence_to_seq,
                "agent_id": agents[position] if agents else None,
            }
        )
    inserted = [row["id"] for row in rows]
    if rows:
        # Core, not ORM objects: the rows are never read back in this transaction, and
        # the unit of work's flush of them cost more than the statement itself
        session.execute(_INSERT, rows)
    keyword_index.index(
        session,
        user_id,
        {memory_id: p.keywords for memory_id, p in zip(inserted, plan.inserts, strict=True)},
    )
    if plan.bumps:
        # One statement for all the bumps, executed for each (psycopg pipelines an
        # executemany: one round trip). Increments happen in SQL so concurrent readers
        # never lose one; the times never move backwards (a confirmation may come from
        # an older conversation). The plan already took the max of the stored and the
        # new importance and confidence.
        session.execute(
            _BUMP,
            [
                {
                    "b_id": bump.memory_id,
                    "b_user_id": user_id,
                    "b_increment": bump.increment,
                    "b_said_at": bump.confirmed_at,
                    "b_importance": bump.importance,
                    "b_confidence": bump.confidence,
                    "b_evidence_seq": bump.evidence_seq,
                    "b_change_seq": number,
                }
                for bump in plan.bumps
            ],
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
    _record_plan(
        session,
        plan,
        inserted,
        user_id=user_id,
        job_id=job_id,
        conversation_id=conversation_id,
        now=now,
    )
    return inserted


def _record_plan(
    session: Session,
    plan: DedupPlan,
    inserted: Sequence[str],
    *,
    user_id: str,
    job_id: str,
    conversation_id: str,
    now: datetime,
) -> None:
    """The plan's events, one statement: where each insert and confirmation came from."""
    events: list[tuple[str, EventKind, dict[str, Any] | None]] = []
    for memory_id, planned in zip(inserted, plan.inserts, strict=True):
        detail: dict[str, Any] = {
            "job_id": job_id,
            "conversation_id": planned.conversation_id,
            "from_seq": planned.evidence_from_seq,
            "to_seq": planned.evidence_to_seq,
        }
        if planned.status != "active":
            detail["status"] = planned.status
        events.append((memory_id, "created", detail))
    for bump in plan.bumps:
        events.append(
            (
                bump.memory_id,
                "confirmed",
                {"job_id": job_id, "conversation_id": conversation_id, "increment": bump.increment},
            )
        )
    for supersede in plan.supersedes:
        by = inserted[supersede.by_insert]
        events.append((supersede.memory_id, "superseded", {"job_id": job_id, "by": by}))
    for forgotten in plan.forgotten:
        events.append((forgotten.memory_id, "suppressed", {"job_id": job_id}))
    memory_events.record_many(
        session, user_id=user_id, actor=memory_events.WORKER, at=now, events=events
    )


def promote_to_verified(
    session: Session, user_id: str, memory_ids: Sequence[str], *, now: datetime
) -> None:
    """Candidates that earned the verified tier (rule in memlane.pipeline.ranking.tiers)."""
    if memory_ids:
        promoted = session.scalars(
            update(MemoryRow)
            .where(
                MemoryRow.id.in_(list(memory_ids)),
                MemoryRow.user_id == user_id,
                MemoryRow.tier == "candidate",
            )
            .values(tier="verified", change_seq=changes.stamp(session, user_id))
            .returning(MemoryRow.id)
        ).all()
        memory_events.record_many(
            session,
            user_id=user_id,
            actor=memory_events.WORKER,
            at=now,
            events=[(memory_id, "verified", {"from": "candidate"}) for memory_id in promoted],
        )
