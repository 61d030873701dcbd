"""memory history: `memory_events`; `messages.purged_at` for retention

- `memory_events`: one row per change of a memory (created, confirmed, superseded,
  edited, pinned, verified, quarantined, forgotten, restored, purged, ...), with its time,
  its actor (an API key's name, `cli`, `worker`, `python`), the conversation that
  evidenced it (for `created` and `confirmed` by a job: what deleting a conversation
  reads) and a JSON detail (the job and messages it came from, the fields an edit
  changed).
- Existing memories get one `created` event each, at their `created_at`, by `worker`
  when a job made them (its id and conversation in the detail), else by `unknown`: the
  history before this revision was not recorded. Memories and their other columns are
  not touched.
- `messages.purged_at`: when retention (MEMLANE_MESSAGE_RETENTION_DAYS, enforced by the
  sweep) emptied the message's text and hash, keeping its position. Null for every
  existing message.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "memory_events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("memory_id", sa.String(length=40), nullable=False),
        sa.Column("conversation_id", sa.String(length=200), nullable=True),
        sa.Column("kind", sa.String(length=24), nullable=False),
        sa.Column("actor", sa.String(length=120), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=False),
    )
    postgres = op.get_bind().dialect.name == "postgresql"
    build = "json_build_object" if postgres else "json_object"
    op.execute(
        "INSERT INTO memory_events (user_id, memory_id, conversation_id, kind, actor, at,"
        " detail) SELECT user_id, id, source_conversation_id, 'created',"
        " CASE WHEN source_job_id IS NULL THEN 'unknown' ELSE 'worker' END, created_at,"
        " CASE WHEN source_job_id IS NULL THEN " + ("'{}'::json" if postgres else "'{}'") + ""
        f" ELSE {build}('job_id', source_job_id, 'conversation_id', source_conversation_id,"
        " 'from_seq', source_from_seq, 'to_seq', source_to_seq) END"
        " FROM memories ORDER BY created_at, id"
    )
    op.create_index("ix_memory_events_user_memory", "memory_events", ["user_id", "memory_id", "id"])
    op.create_index("ix_memory_events_conversation", "memory_events", ["conversation_id"])
    op.add_column("messages", sa.Column("purged_at", sa.DateTime(timezone=True), nullable=True))
    kept = sa.text("purged_at IS NULL")
    op.create_index(
        "ix_messages_kept_created",
        "messages",
        ["created_at"],
        postgresql_where=kept,
        sqlite_where=kept,
    )


def downgrade() -> None:
    op.drop_index("ix_messages_kept_created", table_name="messages")
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("purged_at")
    op.drop_index("ix_memory_events_conversation", table_name="memory_events")
    op.drop_index("ix_memory_events_user_memory", table_name="memory_events")
    op.drop_table("memory_events")
