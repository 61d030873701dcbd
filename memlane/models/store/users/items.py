"""Everything of one user that an assembly can use, read whole: active memories with
their vectors and keywords (a table of columns, store/memories/table.py), episodes with
theirs, procedures and soul blocks. The working set (memlane/models/working_set.py) is
built from this read and kept current. A row becomes a record as every store read makes
it (store/rows.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import or_, select
from sqlalchemy.orm import Session, defer

from memlane.models.store.memories import table as memory_table
from memlane.models.store.rows import Vector, vector_column, vector_of
from memlane.models.store.users.context_items import episode_record, procedures, soul_blocks
from memlane.models.tables import EpisodeRow
from memlane.pipeline.ranking.memory_table import MemoryTable
from memlane.pipeline.records import EpisodeRecord, Procedure, SoulBlock


@dataclass(frozen=True, slots=True)
class UserItems:
    memories: MemoryTable  # the active ones
    memory_models: list[str | None]  # the embedder of each memory's stored vector
    episodes: list[EpisodeRecord]
    episode_vectors: list[tuple[str, Vector] | None]
    procedures: list[Procedure]
    soul_blocks: list[SoulBlock]


def load(
    session: Session, user_id: str, *, model: str, dim: int, agent_id: str | None = None
) -> UserItems:
    """The user's items `agent_id` sees (pipeline.scope), each kind in id order; the
    vectors of `model` (of `dim`)."""
    postgres = session.get_bind().dialect.name == "postgresql"
    memories, memory_models = memory_table.read(
        session, user_id, model=model, dim=dim, agent_id=agent_id
    )
    episodes: list[EpisodeRecord] = []
    episode_vectors: list[tuple[str, Vector] | None] = []
    episode_rows = session.execute(
        select(EpisodeRow, vector_column(session, EpisodeRow.embedding))
        .where(
            EpisodeRow.user_id == user_id,
            or_(EpisodeRow.agent_id.is_(None), EpisodeRow.agent_id == agent_id),
        )
        .order_by(EpisodeRow.id)
        .options(defer(EpisodeRow.embedding))  # read as bytes beside it
    )
    for episode, raw in episode_rows:
        episodes.append(episode_record(episode, with_embedding=False))
        vector = vector_of(raw, postgres)
        model_of = episode.embedding_model
        episode_vectors.append((model_of, vector) if vector is not None and model_of else None)
    return UserItems(
        memories=memories,
        memory_models=memory_models,
        episodes=episodes,
        episode_vectors=episode_vectors,
        procedures=procedures(session, user_id),
        soul_blocks=soul_blocks(session, user_id),
    )
