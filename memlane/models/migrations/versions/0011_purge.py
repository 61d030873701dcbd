"""done jobs keep no extraction

A job's extraction (the memories and episode as the LLM wrote them) was kept after its
store stage, until message retention took it (if set): a purged memory's text stayed in
it. The store stage now drops it when the job is done (models/store/conversations/jobs.py);
this drops it from the jobs already done. Failed jobs keep theirs (a retry of the store
stage reads it). Not undone by a downgrade: the dropped extractions are gone.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("UPDATE jobs SET extraction = NULL WHERE status = 'done' AND extraction IS NOT NULL")


def downgrade() -> None:
    pass  # nothing to restore: the extractions were dropped for good
