"""reply lookup: an index on memories (user_id, source_conversation_id, created_at, ref)

Assembly rule 4 reads the reply of a memory that asks: the memory said next in its
conversation (models/store/reads/replies.py). Without this index that read walked the
user's memories by time (`ix_memories_user_created`) from the question on until one of
its conversation came, and a question that ends its conversation walked every memory the
user stated after it: 6.8 ms at 10k memories on PostgreSQL, ~70 ms at 100k. With it each
reply is one index probe. Existing rows are indexed as they are, none is rewritten;
docs/upgrade-notes.md gives the time on a 100k-memory store.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_memories_user_conversation_said",
        "memories",
        ["user_id", "source_conversation_id", "created_at", "ref"],
    )


def downgrade() -> None:
    op.drop_index("ix_memories_user_conversation_said", table_name="memories")
