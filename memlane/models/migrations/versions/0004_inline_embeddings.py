"""keep memories' embeddings in the row, not in TOAST (PostgreSQL)

A memory's row is about 2.2 KB with a 384-dimension embedding (1.5 KB) and its text;
past 2 KB PostgreSQL moves the largest column it may to the TOAST table, and a vector's
storage is EXTERNAL, so it was the embedding: every cosine the assembler computed then
fetched it from there first (2.5 times slower than from the row on the bench machine).
With `toast_tuple_target` at its maximum and the vectors' storage MAIN, a row keeps its
vectors inline up to a page; only a longer one has its text moved out first.

Rows already written keep their layout until rewritten (`VACUUM FULL memories` or an
update of their embedding, as `memlane reembed` does); new ones get the new one.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_VECTORS = ("embedding", "embedding_next")


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE memories SET (toast_tuple_target = 8160)")
    for column in _VECTORS:
        op.execute(f"ALTER TABLE memories ALTER COLUMN {column} SET STORAGE MAIN")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for column in _VECTORS:
        op.execute(f"ALTER TABLE memories ALTER COLUMN {column} SET STORAGE EXTERNAL")
    op.execute("ALTER TABLE memories RESET (toast_tuple_target)")
