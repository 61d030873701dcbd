"""metadata: a `metadata` JSON object on conversations, memories and episodes

Every existing row gets `{}` (no metadata: a filter naming a key matches none of them, a
filter of `{}` or none matches all). On PostgreSQL the column is JSONB, and memories' and
episodes' carry a GIN index (jsonb_ops: `@>` equality and `?` presence); on SQLite it is
JSON text, filtered with json_each (models/store/metadata_sql.py). Adding a column with a
constant default rewrites no row on either store: docs/upgrade-notes.md gives the time on a
100k-memory store.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

_TABLES = ("conversations", "memories", "episodes")
_INDEXED = ("memories", "episodes")


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    kind = JSONB() if postgres else sa.JSON()
    for table in _TABLES:
        op.add_column(
            table,
            sa.Column("metadata", kind, nullable=False, server_default=sa.text("'{}'")),
        )
    if postgres:
        for table in _INDEXED:
            op.create_index(f"ix_{table}_metadata", table, ["metadata"], postgresql_using="gin")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in _INDEXED:
            op.drop_index(f"ix_{table}_metadata", table_name=table)
    for table in _TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("metadata")
