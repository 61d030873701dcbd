"""posting sizes: `memory_keywords.keyword_count` and `.topic_count`

Each posting carries the size of its memory's keyword set and of its topic set (the
keywords without the polarity stems), and the index `(user_id, keyword, memory_id)`
becomes `(user_id, keyword, topic_count, keyword_count, memory_id)`: the dedup lookup
reads a keyword's postings only within the sizes a similar set can have
(memlane.pipeline.dedup.prefix_filter). Every existing posting is filled from its memory's
stored keywords; nothing else changes.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

# memlane.pipeline.dedup.keywords.POLARITY_STEMS as of this revision
_POLARITY = ("alway", "dislik", "enjoy", "hate", "like", "love", "prefer", "quit", "stop")


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    op.add_column("memory_keywords", sa.Column("keyword_count", sa.Integer(), nullable=True))
    op.add_column("memory_keywords", sa.Column("topic_count", sa.Integer(), nullable=True))
    op.drop_index("ix_memory_keywords_user_keyword_memory", table_name="memory_keywords")
    polar = ", ".join(f"'{stem}'" for stem in _POLARITY)
    # The sizes of the stored keyword sets (what the dedup matcher measures), each memory
    # once; the postings are updated from them in one statement.
    if postgres:
        words = "memories m, json_array_elements_text(m.keywords) AS e(word)"
        word = "e.word"
    else:
        words = "memories m, json_each(m.keywords) AS e"
        word = "e.value"
    op.execute(
        "UPDATE memory_keywords SET keyword_count = s.n, topic_count = s.t FROM"
        f" (SELECT m.id, count(DISTINCT {word}) AS n,"
        f" count(DISTINCT CASE WHEN {word} NOT IN ({polar}) THEN {word} END) AS t"
        f" FROM {words} WHERE m.id IN (SELECT memory_id FROM memory_keywords)"
        " GROUP BY m.id) AS s WHERE memory_keywords.memory_id = s.id"
    )
    # A posting whose memory stores no keywords (none is written so) is sized 0: found
    # by no probe, as its memory's empty set matches none.
    op.execute(
        "UPDATE memory_keywords SET keyword_count = 0, topic_count = 0 WHERE keyword_count IS NULL"
    )
    with op.batch_alter_table("memory_keywords") as batch:
        batch.alter_column("keyword_count", existing_type=sa.Integer(), nullable=False)
        batch.alter_column("topic_count", existing_type=sa.Integer(), nullable=False)
    op.create_index(
        "ix_memory_keywords_user_keyword_sizes",
        "memory_keywords",
        ["user_id", "keyword", "topic_count", "keyword_count", "memory_id"],
    )


def downgrade() -> None:
    op.create_index(
        "ix_memory_keywords_user_keyword_memory",
        "memory_keywords",
        ["user_id", "keyword", "memory_id"],
    )
    op.drop_index("ix_memory_keywords_user_keyword_sizes", table_name="memory_keywords")
    with op.batch_alter_table("memory_keywords") as batch:
        batch.drop_column("topic_count")
        batch.drop_column("keyword_count")
