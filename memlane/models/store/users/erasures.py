"""Fences against what was in flight when a user was erased.

An assembly hands its context pack to a background writer (memlane/service/background.py) that
saves it a few milliseconds later, in whatever process assembled. If the user is erased
in between, from any process, the pack (with the user's id and query) would land after
the erasure and outlive it. Erasing therefore leaves a fence: a hash of the user's id
and the moment, kept FENCE long. Saving packs refuses those of a fenced user inside the
statement that inserts them, and on PostgreSQL under the user's lock taken shared, so a
save either commits before the erasure starts (and is deleted by it) or sees its fence.
A user who comes back within FENCE is served as usual; only their packs go unsaved.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

from sqlalchemy import delete
from sqlalchemy.orm import Session

from memlane.models.tables import Erasure

# Far longer than a pack waits in a writer's queue, twice as long as a pack refused by an
# unavailable database is saved again (memlane.service.background.RETRY_WINDOW), short enough
# that the hash does not stay.
FENCE = timedelta(minutes=10)


def user_key(user_id: str) -> str:
    return hashlib.sha256(user_id.encode()).hexdigest()


def fence(session: Session, user_id: str, *, now: datetime) -> None:
    """Leave the user's fence (in the erasing transaction), lifting expired ones."""
    lift_expired(session, now=now)
    key = user_key(user_id)
    session.execute(delete(Erasure).where(Erasure.user_key == key))
    session.add(Erasure(user_key=key, erased_at=now))
    session.flush()


def lift_expired(session: Session, *, now: datetime) -> int:
    """Delete the fences older than FENCE; how many."""
    result = session.execute(delete(Erasure).where(Erasure.erased_at < now - FENCE))
    return int(result.rowcount)  # type: ignore[attr-defined]
