"""forgetting that stays forgotten: `user_secrets`, `memory_fingerprints`, `jobs.suppressed`

- `user_secrets (user_id, secret, created_at)`: a random key per user, made on the
  user's first purge; erasing the user deletes it.
- `memory_fingerprints`: what a purge leaves of a memory: its keywords and normalised
  text, each HMAC-SHA256'd with the user's secret, and its polarity. Empty after the
  upgrade: memories purged before 0008 left nothing to recognise them by.
- `jobs.suppressed`: how many extracted memories a job did not store because the user
  forgot or purged them; 0 for every existing job.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "user_secrets",
        sa.Column("user_id", sa.String(length=200), primary_key=True),
        sa.Column("secret", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "memory_fingerprints",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("memory_id", sa.String(length=40), nullable=False),
        sa.Column("keywords", sa.JSON(), nullable=False),
        sa.Column("text_hash", sa.String(length=64), nullable=False),
        sa.Column("polarity", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_memory_fingerprints_user", "memory_fingerprints", ["user_id"])
    # A constant default: PostgreSQL and SQLite add the column without rewriting jobs.
    op.add_column("jobs", sa.Column("suppressed", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("suppressed")
    op.drop_index("ix_memory_fingerprints_user", table_name="memory_fingerprints")
    op.drop_table("memory_fingerprints")
    op.drop_table("user_secrets")
