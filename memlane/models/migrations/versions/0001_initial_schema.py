"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import Vector

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# pgvector's unconstrained `vector` on PostgreSQL (the dimension is recorded per row);
# float32 bytes on SQLite.
EMBEDDING = sa.LargeBinary().with_variant(Vector(), "postgresql")


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.create_table(
        "context_packs",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("assembled_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("context_packs", schema=None) as batch_op:
        batch_op.create_index(
            "ix_context_packs_user_assembled", ["user_id", "assembled_at"], unique=False
        )

    op.create_table(
        "conversations",
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("message_count", sa.Integer(), nullable=False),
        sa.Column("assistant_count", sa.Integer(), nullable=False),
        sa.Column("extracted_to_seq", sa.Integer(), nullable=False),
        sa.Column("final", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_message_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_conversations_last_message_at"), ["last_message_at"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_conversations_user_id"), ["user_id"], unique=False)

    op.create_table(
        "episodes",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("conversation_id", sa.String(length=200), nullable=False),
        sa.Column("job_id", sa.String(length=40), nullable=True),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("topics", sa.JSON(), nullable=False),
        sa.Column("outcome", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("job_id"),
    )
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.create_index("ix_episodes_user_created", ["user_id", "created_at"], unique=False)

    op.create_table(
        "memories",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("category", sa.String(length=16), nullable=False),
        sa.Column("importance", sa.Float(), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("tier", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("sensitive", sa.Boolean(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("keywords", sa.JSON(), nullable=False),
        sa.Column("embedding", EMBEDDING, nullable=True),
        sa.Column("embedding_model", sa.String(length=200), nullable=True),
        sa.Column("embedding_dim", sa.Integer(), nullable=True),
        sa.Column("access_count", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("accessed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("superseded_by", sa.String(length=40), nullable=True),
        sa.Column("source_conversation_id", sa.String(length=200), nullable=True),
        sa.Column("source_job_id", sa.String(length=40), nullable=True),
        sa.Column("source_from_seq", sa.Integer(), nullable=True),
        sa.Column("source_to_seq", sa.Integer(), nullable=True),
        sa.Column("evidence_seq", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.create_index("ix_memories_user_accessed", ["user_id", "accessed_at"], unique=False)
        batch_op.create_index(
            "ix_memories_user_importance", ["user_id", "importance"], unique=False
        )
        batch_op.create_index("ix_memories_user_status", ["user_id", "status"], unique=False)
        batch_op.create_index("ix_memories_user_tier", ["user_id", "tier"], unique=False)

    op.create_table(
        "procedures",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("keywords", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("user_id", "name", name="uq_procedures_user_name"),
    )
    with op.batch_alter_table("procedures", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_procedures_user_id"), ["user_id"], unique=False)

    op.create_table(
        "soul_blocks",
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("user_id", "kind"),
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("conversation_id", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("stage", sa.String(length=16), nullable=False),
        sa.Column("window_start_seq", sa.Integer(), nullable=False),
        sa.Column("window_end_seq", sa.Integer(), nullable=False),
        sa.Column("new_from_seq", sa.Integer(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("model", sa.String(length=200), nullable=True),
        sa.Column("tokens_in", sa.Integer(), nullable=True),
        sa.Column("tokens_out", sa.Integer(), nullable=True),
        sa.Column("cost_usd", sa.Float(), nullable=True),
        sa.Column("latency_ms", sa.Float(), nullable=True),
        sa.Column("extraction", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["conversation_id"], ["conversations.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("conversation_id", "window_end_seq", name="uq_jobs_conversation_end"),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index("ix_jobs_status_updated", ["status", "updated_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_jobs_user_id"), ["user_id"], unique=False)

    op.create_table(
        "memory_keywords",
        sa.Column("memory_id", sa.String(length=40), nullable=False),
        sa.Column("keyword", sa.String(length=100), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.ForeignKeyConstraint(["memory_id"], ["memories.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("memory_id", "keyword"),
    )
    with op.batch_alter_table("memory_keywords", schema=None) as batch_op:
        batch_op.create_index(
            "ix_memory_keywords_user_keyword", ["user_id", "keyword"], unique=False
        )

    op.create_table(
        "messages",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("conversation_id", sa.String(length=200), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("external_id", sa.String(length=200), nullable=True),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("content_sha256", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["conversation_id"], ["conversations.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("conversation_id", "seq", name="uq_messages_conversation_seq"),
    )
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.create_index(
            "uq_messages_conversation_external_id", ["conversation_id", "external_id"], unique=True
        )


def downgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_index("uq_messages_conversation_external_id")

    op.drop_table("messages")
    with op.batch_alter_table("memory_keywords", schema=None) as batch_op:
        batch_op.drop_index("ix_memory_keywords_user_keyword")

    op.drop_table("memory_keywords")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_jobs_user_id"))
        batch_op.drop_index("ix_jobs_status_updated")

    op.drop_table("jobs")
    op.drop_table("soul_blocks")
    with op.batch_alter_table("procedures", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_procedures_user_id"))

    op.drop_table("procedures")
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.drop_index("ix_memories_user_tier")
        batch_op.drop_index("ix_memories_user_status")
        batch_op.drop_index("ix_memories_user_importance")
        batch_op.drop_index("ix_memories_user_accessed")

    op.drop_table("memories")
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.drop_index("ix_episodes_user_created")

    op.drop_table("episodes")
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_conversations_user_id"))
        batch_op.drop_index(batch_op.f("ix_conversations_last_message_at"))

    op.drop_table("conversations")
    with op.batch_alter_table("context_packs", schema=None) as batch_op:
        batch_op.drop_index("ix_context_packs_user_assembled")

    op.drop_table("context_packs")
