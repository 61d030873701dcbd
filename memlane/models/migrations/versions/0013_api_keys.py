"""api keys as data: `api_keys (id, name, key_hash, scopes, users, rate_per_s, burst,
created_at, expires_at, last_used_at, revoked_at)`

Keys made by `memlane keys create` (or POST /v1/keys): a keyed hash of the secret, never
the secret, with the key's scopes, user patterns and rate limit
(memlane/service/keys/). A new, empty table: no existing row is read or changed, and
MEMLANE_API_KEYS keep working as before.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(length=12), primary_key=True),
        sa.Column("name", sa.String(length=60), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("scopes", sa.JSON(), nullable=False),
        sa.Column("users", sa.JSON(), nullable=False),
        sa.Column("rate_per_s", sa.Float(), nullable=True),
        sa.Column("burst", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_api_keys_name", "api_keys", ["name"])


def downgrade() -> None:
    op.drop_index("ix_api_keys_name", table_name="api_keys")
    op.drop_table("api_keys")
