"""Everything of one user that an assembly can use, read whole: active memories with
their vectors and keywords, episodes with theirs, procedures and soul blocks. The
working set (memlane/working_set.py) is built from this read and kept current."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from memlane.models.schemas import EpisodeRecord, MemoryRecord, Procedure, SoulBlock
from memlane.models.store.context_items import episode_record, procedures, soul_blocks
from memlane.models.store.memories import to_record
from memlane.models.tables import EpisodeRow, MemoryRow


@dataclass(frozen=True, slots=True)
class UserItems:
    memories: list[MemoryRecord]  # active ones, with their vectors and keywords
    memory_models: list[str | None]  # the embedder of each memory's vector
    episodes: list[EpisodeRecord]  # with their vectors
    episode_models: list[str | None]
    procedures: list[Procedure]
    soul_blocks: list[SoulBlock]


def load(session: Session, user_id: str) -> UserItems:
    """The user's items, each list in id order."""
    memories: list[MemoryRecord] = []
    memory_models: list[str | None] = []
    rows = session.scalars(
        select(MemoryRow)
        .where(MemoryRow.user_id == user_id, MemoryRow.status == "active")
        .order_by(MemoryRow.id)
    )
    for memory in rows:
        memories.append(to_record(memory, with_embedding=True))
        memory_models.append(memory.embedding_model if memory.embedding is not None else None)
    episodes: list[EpisodeRecord] = []
    episode_models: list[str | None] = []
    for row in session.scalars(
        select(EpisodeRow).where(EpisodeRow.user_id == user_id).order_by(EpisodeRow.id)
    ):
        episodes.append(episode_record(row))
        episode_models.append(row.embedding_model if row.embedding is not None else None)
    return UserItems(
        memories=memories,
        memory_models=memory_models,
        episodes=episodes,
        episode_models=episode_models,
        procedures=procedures(session, user_id),
        soul_blocks=soul_blocks(session, user_id),
    )
