"""per-user keyword frequencies for the dedup prefix filter; "user" is no keyword

- `memory_keyword_counts (user_id, keyword, memories)`: how many of a user's memories hold
  each keyword, filled from `memory_keywords` (every status, as the index holds them),
  and under the empty keyword how many memories the index holds.
  Dedup reads only the postings of a new memory's rarest keywords
  (memlane.pipeline.dedup.prefix_filter); the store keeps the counts current from then on.
- "user" (the subject of every extracted memory) is no longer a keyword
  (memlane.pipeline.dedup.keywords): it goes from the stored keywords of every memory and from
  the index, except where the text says "users" (a plural is still a keyword).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "UPDATE memories SET keywords = (keywords::jsonb - 'user')::json"
            " WHERE keywords::jsonb ? 'user' AND content NOT ILIKE '%users%'"
        )
        op.execute(
            "DELETE FROM memory_keywords k USING memories m WHERE k.memory_id = m.id"
            " AND k.keyword = 'user' AND NOT (m.keywords::jsonb ? 'user')"
        )
    else:
        has_user = "EXISTS (SELECT 1 FROM json_each(memories.keywords) WHERE value = 'user')"
        op.execute(
            "UPDATE memories SET keywords = (SELECT json_group_array(value)"
            " FROM json_each(memories.keywords) WHERE value <> 'user')"
            f" WHERE {has_user} AND content NOT LIKE '%users%'"
        )
        op.execute(
            "DELETE FROM memory_keywords WHERE keyword = 'user' AND memory_id IN"
            f" (SELECT id FROM memories WHERE NOT {has_user})"
        )
    op.create_table(
        "memory_keyword_counts",
        sa.Column("user_id", sa.String(length=200), primary_key=True),
        sa.Column("keyword", sa.String(length=100), primary_key=True),
        sa.Column("memories", sa.Integer(), nullable=False),
    )
    op.execute(
        "INSERT INTO memory_keyword_counts (user_id, keyword, memories)"
        " SELECT user_id, keyword, count(*) FROM memory_keywords GROUP BY user_id, keyword"
    )
    # Under the empty keyword: how many memories the index holds for the user.
    op.execute(
        "INSERT INTO memory_keyword_counts (user_id, keyword, memories)"
        " SELECT user_id, '', count(DISTINCT memory_id) FROM memory_keywords GROUP BY user_id"
    )


def downgrade() -> None:
    # The keyword "user" is not put back: the keyword function of 0005's code would.
    op.drop_table("memory_keyword_counts")
