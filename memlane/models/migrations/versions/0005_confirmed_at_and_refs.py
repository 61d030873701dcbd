"""what was said apart from what was shown; short ids; episodes dated by their messages

- `memories.confirmed_at`: when the memory was last stated or confirmed, a message's time.
  `scored` takes recency from it. Until now recency came from `accessed_at`, which every
  assembly moved to the moment it showed the memory (so a memory once shown kept being
  shown) and every dedup confirmation moved to processing time. Existing rows get the
  time of the newest message that evidenced them in their own conversation
  (`evidence_seq`), else their `created_at`. `accessed_at` keeps its values and its
  meaning: last stated, confirmed or shown, the `recent` strategy's order.
- `ref` on memories, episodes and procedures: a short id per user, one numbering for the
  three (`user_state.next_ref` holds the next), shown in contexts instead of the 24-hex
  ids. Existing items are numbered per user by `created_at`, then kind, then id.
- `episodes.created_at` becomes the time of the last message the episode summarises
  (it was the time the store stage ran), read through the episode's job. Not undone by
  the downgrade.
- A per-user change feed: `user_state.version`, taken by every transaction that writes a
  user's memories, episodes, procedures or soul blocks; `change_seq` on those rows (0 for
  existing ones) with a (user_id, change_seq) index; `removed_items` for items deleted
  outright. Each process's working set asks for what changed since it last looked.
- `episodes.embedding` (with its model and dimension), written by the store stage, so an
  episode enters a context on its relevance to the query like a memory. Existing
  episodes have none until `memlane reembed`; their relevance is lexical until then.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import Vector

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_REF_TABLES = ("memories", "episodes", "procedures")


def upgrade() -> None:
    op.create_table(
        "user_state",
        sa.Column("user_id", sa.String(length=200), primary_key=True),
        sa.Column("next_ref", sa.Integer(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False, server_default="0"),
    )
    op.create_table(
        "removed_items",
        sa.Column("user_id", sa.String(length=200), primary_key=True),
        sa.Column("item_id", sa.String(length=200), primary_key=True),
        sa.Column("change_seq", sa.BigInteger(), nullable=False),
    )
    for table in (*_REF_TABLES, "soul_blocks"):
        op.add_column(
            table, sa.Column("change_seq", sa.BigInteger(), nullable=False, server_default="0")
        )
        if table != "soul_blocks":  # a user has three at most
            op.create_index(f"ix_{table}_user_change", table, ["user_id", "change_seq"])
    op.add_column("memories", sa.Column("confirmed_at", sa.DateTime(timezone=True)))
    for table in _REF_TABLES:
        op.add_column(table, sa.Column("ref", sa.Integer()))
    embedding = sa.LargeBinary().with_variant(Vector(), "postgresql")
    op.add_column("episodes", sa.Column("embedding", embedding, nullable=True))
    op.add_column("episodes", sa.Column("embedding_model", sa.String(200), nullable=True))
    op.add_column("episodes", sa.Column("embedding_dim", sa.Integer(), nullable=True))

    postgres = op.get_bind().dialect.name == "postgresql"
    later = "GREATEST" if postgres else "MAX"
    earlier = "LEAST" if postgres else "MIN"
    op.execute(
        f"""
        UPDATE memories SET confirmed_at = {later}(memories.created_at, said.created_at)
        FROM messages AS said
        WHERE said.conversation_id = memories.source_conversation_id
          AND said.seq = memories.evidence_seq
        """
    )
    op.execute("UPDATE memories SET confirmed_at = created_at WHERE confirmed_at IS NULL")
    op.execute(
        f"""
        UPDATE episodes SET created_at = {earlier}(episodes.created_at, said.created_at)
        FROM jobs, messages AS said
        WHERE jobs.id = episodes.job_id
          AND said.conversation_id = jobs.conversation_id
          AND said.seq = jobs.window_end_seq
        """
    )
    op.execute(
        """
        CREATE TEMPORARY TABLE ref_backfill AS
        SELECT kind, id, user_id,
               ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY created_at, kind, id) AS ref
        FROM (
            SELECT 'm' AS kind, id, user_id, created_at FROM memories
            UNION ALL SELECT 'e', id, user_id, created_at FROM episodes
            UNION ALL SELECT 'p', id, user_id, created_at FROM procedures
        ) AS items
        """
    )
    op.execute("CREATE INDEX ix_ref_backfill ON ref_backfill (kind, id)")
    for table in _REF_TABLES:
        op.execute(
            f"""
            UPDATE {table} SET ref = ref_backfill.ref FROM ref_backfill
            WHERE ref_backfill.kind = '{table[0]}' AND ref_backfill.id = {table}.id
            """
        )
    op.execute(
        """
        INSERT INTO user_state (user_id, next_ref)
        SELECT user_id, MAX(ref) + 1 FROM ref_backfill GROUP BY user_id
        """
    )
    op.execute("DROP TABLE ref_backfill")

    with op.batch_alter_table("memories") as batch:
        batch.alter_column("confirmed_at", existing_type=sa.DateTime(timezone=True), nullable=False)
        batch.alter_column("ref", existing_type=sa.Integer(), nullable=False)
        batch.create_unique_constraint("uq_memories_user_ref", ["user_id", "ref"])
    with op.batch_alter_table("episodes") as batch:
        batch.alter_column("ref", existing_type=sa.Integer(), nullable=False)
        batch.create_unique_constraint("uq_episodes_user_ref", ["user_id", "ref"])
    with op.batch_alter_table("procedures") as batch:
        batch.alter_column("ref", existing_type=sa.Integer(), nullable=False)
        batch.create_unique_constraint("uq_procedures_user_ref", ["user_id", "ref"])


def downgrade() -> None:
    for table in reversed(_REF_TABLES):
        with op.batch_alter_table(table) as batch:
            batch.drop_constraint(f"uq_{table}_user_ref", type_="unique")
            batch.drop_column("ref")
    for table in (*_REF_TABLES, "soul_blocks"):
        if table != "soul_blocks":
            op.drop_index(f"ix_{table}_user_change", table_name=table)
        with op.batch_alter_table(table) as batch:
            batch.drop_column("change_seq")
    op.drop_table("removed_items")
    with op.batch_alter_table("memories") as batch:
        batch.drop_column("confirmed_at")
    with op.batch_alter_table("episodes") as batch:
        for column in ("embedding", "embedding_model", "embedding_dim"):
            batch.drop_column(column)
    op.drop_table("user_state")
