"""re-embedding columns and the lexical index

- `embedding_next`, `embedding_next_model`, `embedding_next_dim`: where `memlane reembed`
  writes a memory's vector of the new model while the old one keeps serving; one UPDATE
  per user moves them into `embedding*` when all of that user's are ready.
- PostgreSQL only: `content_tsv`, a stored generated tsvector of the content (English
  configuration) with a GIN index, for the lexical half of hybrid relevance. SQLite ranks
  lexically with BM25 over the existing `memory_keywords` index instead (no column).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import Vector
from sqlalchemy.dialects.postgresql import TSVECTOR

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

EMBEDDING = sa.LargeBinary().with_variant(Vector(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.add_column(sa.Column("embedding_next", EMBEDDING, nullable=True))
        batch_op.add_column(sa.Column("embedding_next_model", sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column("embedding_next_dim", sa.Integer(), nullable=True))
    if op.get_bind().dialect.name == "postgresql":
        op.add_column(
            "memories",
            sa.Column(
                "content_tsv",
                TSVECTOR(),
                sa.Computed("to_tsvector('english', content)", persisted=True),
                nullable=True,
            ),
        )
        op.create_index(
            "ix_memories_content_tsv", "memories", ["content_tsv"], postgresql_using="gin"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.drop_index("ix_memories_content_tsv", table_name="memories")
        op.drop_column("memories", "content_tsv")
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.drop_column("embedding_next_dim")
        batch_op.drop_column("embedding_next_model")
        batch_op.drop_column("embedding_next")
