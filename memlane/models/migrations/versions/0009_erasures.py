"""erasure fences: `erasures (user_key, erased_at)`

Erasing a user leaves a sha256 of their id and the moment for ten minutes, so a context
pack assembled before the erasure and saved after it (by another process's background
writer) is refused instead of outliving the erasure (models/store/users/erasures.py). A new,
empty table: no existing row is read or changed.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "erasures",
        sa.Column("user_key", sa.String(length=64), primary_key=True),
        sa.Column("erased_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("erasures")
