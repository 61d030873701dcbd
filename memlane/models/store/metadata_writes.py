"""Metadata written: a conversation's as its transcripts send it, and what a store job
learned from the conversation given the conversation's (pipeline.metadata.values).

- A transcript's metadata updates its conversation's key by key: a key sent again
  replaces the stored value, keys not sent are kept (so a transcript sent without
  metadata leaves it as it was).
- A store job's new memories and its episode take the conversation's metadata as it is
  when the job stores; a memory the job confirms merges it into its own
  (`merge_metadata`: a key of two values holds both).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy import Table
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Session

from memlane.models.tables import Conversation, EpisodeRow, MemoryRow
from memlane.pipeline.metadata.values import merge_metadata

_CONVERSATIONS = cast(Table, Conversation.__table__)
_MEMORIES = cast(Table, MemoryRow.__table__)
_EPISODES = cast(Table, EpisodeRow.__table__)


def updated_metadata(dialect: str, excluded: Any) -> Any:
    """The conversation's metadata with a transcript's (`excluded`, the row its insert
    would have written) written over it key by key, in an upsert's DO UPDATE."""
    stored, sent = _CONVERSATIONS.c.metadata, excluded.metadata
    if dialect == "postgresql":
        return sa.type_coerce(stored, JSONB).op("||")(sa.type_coerce(sent, JSONB))
    # RFC 7396 merge: values are scalars or lists, so key by key
    return sa.func.json_patch(stored, sent)


def inherit(
    session: Session,
    *,
    user_id: str,
    conversation_id: str,
    inserted: Sequence[str],
    confirmed: Sequence[str],
    episode_id: str | None,
) -> None:
    """Give what a store job wrote the metadata of its conversation (module docstring),
    in the job's transaction under the user's lock. A conversation without metadata
    costs this one read."""
    metadata = session.scalar(
        sa.select(_CONVERSATIONS.c.metadata).where(_CONVERSATIONS.c.id == conversation_id)
    )
    if not metadata:
        return
    if inserted:
        session.execute(
            sa.update(_MEMORIES)
            .where(_MEMORIES.c.id.in_(list(inserted)), _MEMORIES.c.user_id == user_id)
            .values(metadata=metadata)
        )
    if episode_id is not None:
        session.execute(
            sa.update(_EPISODES)
            .where(_EPISODES.c.id == episode_id, _EPISODES.c.user_id == user_id)
            .values(metadata=metadata)
        )
    if not confirmed:
        return
    held = session.execute(
        sa.select(_MEMORIES.c.id, _MEMORIES.c.metadata).where(
            _MEMORIES.c.id.in_(sorted(set(confirmed))), _MEMORIES.c.user_id == user_id
        )
    ).all()
    for memory_id, kept in held:
        merged = merge_metadata(kept or {}, metadata)
        if merged != kept:
            session.execute(
                sa.update(_MEMORIES).where(_MEMORIES.c.id == memory_id).values(metadata=merged)
            )
