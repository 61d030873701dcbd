"""A user's context items that are not memories: episodes, soul blocks and procedures, and
the read of all three that an assembly makes. Context packs are store/users/packs.py."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    JSON,
    Integer,
    String,
    Table,
    Text,
    bindparam,
    cast,
    delete,
    literal,
    null,
    or_,
    select,
    union_all,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from memlane.models.store.memories import refs
from memlane.models.store.users import change_feed as changes
from memlane.models.tables import (
    EpisodeRow,
    ProcedureRow,
    SoulBlockRow,
)
from memlane.pipeline.errors import ConflictError, NotFoundError
from memlane.pipeline.records import (
    SOUL_KINDS,
    EpisodeRecord,
    ExtractedEpisode,
    Procedure,
    SoulBlock,
    SoulKind,
)


def _insert(session: Session) -> Any:
    return pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert


# --------------------------------------------------------------------------- episodes


def save_episode(
    session: Session,
    *,
    user_id: str,
    conversation_id: str,
    job_id: str,
    episode: ExtractedEpisode,
    created_at: datetime,
    embedding: Sequence[float] | None = None,
    embedding_model: str | None = None,
    ref: int | None = None,
    agent_id: str | None = None,
) -> str:
    """One episode per job (unique job_id), so a repeated store stage adds none.
    `created_at`: when the last message it summarises was said; `ref`: one the caller
    allocated (store/memories/refs.py) for it, taken whether or not the episode was new."""
    episode_id = "ep_" + uuid.uuid5(uuid.NAMESPACE_URL, f"memlane:episode:{job_id}").hex[:24]
    if ref is None:
        if session.get(EpisodeRow, episode_id) is not None:
            return episode_id
        ref = refs.allocate(session, user_id)
    vector = list(embedding) if embedding is not None else None
    session.execute(
        _episode_insert(session.get_bind().dialect.name),
        {
            "id": episode_id,
            "user_id": user_id,
            "conversation_id": conversation_id,
            "job_id": job_id,
            "summary": episode.summary,
            "topics": list(episode.topics),
            "outcome": episode.outcome,
            "created_at": created_at,
            "ref": ref,
            "change_seq": changes.stamp(session, user_id),
            "embedding": vector,
            "embedding_model": embedding_model if vector is not None else None,
            "embedding_dim": len(vector) if vector is not None else None,
            "agent_id": agent_id,
        },
    )
    return episode_id


@lru_cache(maxsize=4)
def _episode_insert(dialect: str) -> Any:
    """The store stage's episode insert, built once per dialect (it runs once a job)."""
    insert = pg_insert if dialect == "postgresql" else sqlite_insert
    table: Table = EpisodeRow.__table__  # type: ignore[assignment]
    return insert(table).on_conflict_do_nothing()


def episode_record(row: EpisodeRow, *, with_embedding: bool = True) -> EpisodeRecord:
    return EpisodeRecord(
        id=row.id,
        user_id=row.user_id,
        conversation_id=row.conversation_id,
        summary=row.summary,
        topics=list(row.topics or []),
        outcome=row.outcome,
        created_at=row.created_at,
        ref=row.ref,
        embedding=tuple(row.embedding) if with_embedding and row.embedding is not None else None,
        agent_id=row.agent_id,
        metadata=row.meta or {},
    )


def recent_episodes(session: Session, user_id: str, *, limit: int = 20) -> list[EpisodeRecord]:
    rows = session.scalars(
        select(EpisodeRow)
        .where(EpisodeRow.user_id == user_id)
        .order_by(EpisodeRow.created_at.desc(), EpisodeRow.id)
        .limit(limit)
    )
    return [episode_record(row, with_embedding=False) for row in rows]


# --------------------------------------------------------------------------- soul blocks


def set_soul_block(
    session: Session, *, user_id: str, kind: SoulKind, content: str, now: datetime
) -> SoulBlock:
    number = changes.stamp(session, user_id)
    statement = _insert(session)(SoulBlockRow).values(
        user_id=user_id, kind=kind, content=content, updated_at=now, change_seq=number
    )
    session.execute(
        statement.on_conflict_do_update(
            index_elements=["user_id", "kind"],
            set_={"content": content, "updated_at": now, "change_seq": number},
        )
    )
    return SoulBlock(user_id=user_id, kind=kind, content=content, updated_at=now)


def delete_soul_block(session: Session, *, user_id: str, kind: SoulKind) -> None:
    result = session.execute(
        delete(SoulBlockRow).where(SoulBlockRow.user_id == user_id, SoulBlockRow.kind == kind)
    )
    if not result.rowcount:  # type: ignore[attr-defined]
        raise NotFoundError(f"user {user_id!r} has no {kind} soul block")
    changes.removed(session, user_id, f"soul:{kind}")


def soul_blocks(session: Session, user_id: str) -> list[SoulBlock]:
    rows = session.scalars(select(SoulBlockRow).where(SoulBlockRow.user_id == user_id))
    return [
        SoulBlock(user_id=r.user_id, kind=r.kind, content=r.content, updated_at=r.updated_at)  # type: ignore[arg-type]
        for r in rows
    ]


# --------------------------------------------------------------------------- procedures


def add_procedure(
    session: Session,
    *,
    user_id: str,
    name: str,
    content: str,
    keywords: Iterable[str],
    now: datetime,
) -> Procedure:
    taken = select(ProcedureRow.id).where(
        ProcedureRow.user_id == user_id, ProcedureRow.name == name
    )
    if session.scalar(taken) is not None:
        raise ConflictError(
            f"user {user_id!r} already has a procedure named {name!r}; choose another name"
        )
    procedure_id = "proc_" + uuid.uuid4().hex[:24]
    words = sorted(set(keywords))
    session.add(
        ProcedureRow(
            id=procedure_id,
            user_id=user_id,
            name=name,
            content=content,
            keywords=words,
            created_at=now,
            ref=(ref := refs.allocate(session, user_id)),
            change_seq=changes.stamp(session, user_id),
        )
    )
    session.flush()
    return Procedure(
        id=procedure_id,
        user_id=user_id,
        name=name,
        content=content,
        keywords=frozenset(words),
        created_at=now,
        ref=ref,
    )


def procedure_record(row: ProcedureRow) -> Procedure:
    return Procedure(
        id=row.id,
        user_id=row.user_id,
        name=row.name,
        content=row.content,
        keywords=frozenset(row.keywords or ()),
        created_at=row.created_at,
        ref=row.ref,
    )


def procedures(session: Session, user_id: str) -> list[Procedure]:
    rows = session.scalars(
        select(ProcedureRow).where(ProcedureRow.user_id == user_id).order_by(ProcedureRow.id)
    )
    return [procedure_record(row) for row in rows]


def delete_procedure(session: Session, *, user_id: str, procedure_id: str) -> str:
    """Delete the user's procedure named by its id or its name; its id."""
    found = session.scalars(
        select(ProcedureRow.id)
        .where(
            ProcedureRow.user_id == user_id,
            or_(ProcedureRow.id == procedure_id, ProcedureRow.name == procedure_id),
        )
        .order_by((ProcedureRow.id == procedure_id).desc())  # an id before a name
    ).first()
    if found is None:
        raise NotFoundError(f"user {user_id!r} has no procedure {procedure_id!r}")
    session.execute(delete(ProcedureRow).where(ProcedureRow.id == found))
    changes.removed(session, user_id, found)
    return found


# --------------------------------------------------------------------------- all three


@dataclass(frozen=True, slots=True)
class ContextItems:
    soul_blocks: list[SoulBlock]
    episodes: list[EpisodeRecord]
    procedures: list[Procedure]


def context_items(
    session: Session, user_id: str, *, episode_limit: int = 10, agent_id: str | None = None
) -> ContextItems:
    """The user's soul blocks, `episode_limit` most recent episodes `agent_id` sees
    (pipeline.scope) and procedures, as
    `soul_blocks`, `recent_episodes` and `procedures` give them, in one round trip (the
    assembler reads them on every call)."""
    rows = session.execute(
        items_statement(episode_limit), {"user_id": user_id, "agent_id": agent_id}
    ).all()
    return items_from_rows(rows)


@lru_cache(maxsize=16)
def items_statement(episode_limit: int) -> Any:
    """The read of `context_items` (parameters `user_id`, `agent_id`): one UNION ALL
    whose rows share one shape, (part, id, user_id, t1, t2, t3, words, at, ref, agent)."""
    text_null: Any = cast(null(), Text)
    no_agent: Any = cast(null(), String)
    user_id = bindparam("user_id", type_=String)
    souls = select(
        literal("soul", String).label("part"),
        SoulBlockRow.kind.label("id"),
        SoulBlockRow.user_id.label("user_id"),
        SoulBlockRow.content.label("t1"),
        text_null.label("t2"),
        text_null.label("t3"),
        cast(null(), JSON).label("words"),
        SoulBlockRow.updated_at.label("at"),
        cast(null(), Integer).label("ref"),
        no_agent.label("agent"),
    ).where(SoulBlockRow.user_id == user_id)
    episodes = (
        select(
            literal("episode", String),
            EpisodeRow.id,
            EpisodeRow.user_id,
            EpisodeRow.summary,
            EpisodeRow.outcome,
            EpisodeRow.conversation_id,
            EpisodeRow.topics,
            EpisodeRow.created_at,
            EpisodeRow.ref,
            EpisodeRow.agent_id,
        )
        .where(
            EpisodeRow.user_id == user_id,
            or_(EpisodeRow.agent_id.is_(None), EpisodeRow.agent_id == bindparam("agent_id")),
        )
        .order_by(EpisodeRow.created_at.desc(), EpisodeRow.id)
        .limit(episode_limit)
        # Named: an anonymous subquery draws its name from os.urandom on every call
        # (slow in a VM short of entropy: bench/README.md).
        .subquery("recent_episodes")
        .select()
    )
    procedures = select(
        literal("procedure", String),
        ProcedureRow.id,
        ProcedureRow.user_id,
        ProcedureRow.name,
        ProcedureRow.content,
        text_null,
        ProcedureRow.keywords,
        ProcedureRow.created_at,
        ProcedureRow.ref,
        no_agent,
    ).where(ProcedureRow.user_id == user_id)
    return union_all(souls, episodes, procedures)


def items_from_rows(rows: Iterable[Sequence[Any]]) -> ContextItems:
    """`context_items` from the rows of `items_statement`, in the order the assembler
    reads them."""
    found = ContextItems([], [], [])
    for part, item_id, owner, t1, t2, t3, words, at, ref, agent in rows:
        if part == "soul":
            found.soul_blocks.append(
                SoulBlock(user_id=owner, kind=item_id, content=t1, updated_at=at)
            )
        elif part == "episode":
            found.episodes.append(
                EpisodeRecord(
                    id=item_id,
                    user_id=owner,
                    conversation_id=t3,
                    summary=t1,
                    topics=list(words or []),
                    outcome=t2,
                    created_at=at,
                    ref=ref,
                    agent_id=agent,
                )
            )
        else:
            found.procedures.append(
                Procedure(
                    id=item_id,
                    user_id=owner,
                    name=t1,
                    content=t2,
                    keywords=frozenset(words or ()),
                    created_at=at,
                    ref=ref,
                )
            )
    found.soul_blocks.sort(key=lambda b: SOUL_KINDS.index(b.kind))
    found.episodes.sort(key=lambda e: e.id)
    found.episodes.sort(key=lambda e: e.created_at, reverse=True)
    found.procedures.sort(key=lambda p: p.id)
    return found
