"""agents: `conversations.agent_id`, `memories.agent_id`, `episodes.agent_id`

A transcript may name the agent (assistant persona) the user talks to. Its conversation
keeps that agent; a memory learned from it is either about the user (NULL: every agent
of the user sees it) or that agent's alone; an episode of a conversation with an agent
is that agent's. Three nullable columns with no default: every existing row stays NULL
(shared, as before), and neither backend rewrites a table to add them.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

_TABLES = ("conversations", "memories", "episodes")


def upgrade() -> None:
    for table in _TABLES:
        op.add_column(table, sa.Column("agent_id", sa.String(length=200), nullable=True))


def downgrade() -> None:
    # Agent-specific memories and episodes become the user's shared ones.
    for table in reversed(_TABLES):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("agent_id")
