"""Fingerprints of purged memories (pipeline/dedup/fingerprints.py) and the user secret that
keys them: kept on purge, read whole by the store stage (a user has few), lifted by
hand, and deleted with the user (store/users/erase.py lists both tables)."""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import bindparam, delete, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from memlane.models.tables import MemoryFingerprint, UserSecret
from memlane.pipeline.dedup.fingerprints import Fingerprint, fingerprint


def _secret(session: Session, user_id: str, now: datetime) -> bytes:
    """The user's secret, made on first need. Two transactions making it at once keep
    the first one's (the insert does nothing on a conflict; the read sees the winner)."""
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    session.execute(
        insert(UserSecret)
        .values(user_id=user_id, secret=secrets.token_hex(32), created_at=now)
        .on_conflict_do_nothing(index_elements=["user_id"])
    )
    value = session.scalar(select(UserSecret.secret).where(UserSecret.user_id == user_id))
    assert value is not None  # inserted above, or by another transaction
    return bytes.fromhex(value)


def keep(
    session: Session,
    user_id: str,
    memory_id: str,
    content: str,
    words: Iterable[str],
    *,
    now: datetime,
) -> None:
    """What a purge leaves of a memory: its fingerprint, no content."""
    made = fingerprint(_secret(session, user_id, now), content, words)
    session.add(
        MemoryFingerprint(
            user_id=user_id,
            memory_id=memory_id,
            keywords=sorted(made.keywords),
            text_hash=made.text,
            polarity=made.polarity,
            created_at=now,
        )
    )


_READ = (  # built once: the store stage reads it every job
    select(
        UserSecret.secret,
        MemoryFingerprint.keywords,
        MemoryFingerprint.text_hash,
        MemoryFingerprint.polarity,
    )
    .select_from(UserSecret)
    .outerjoin(MemoryFingerprint, MemoryFingerprint.user_id == UserSecret.user_id)
    .where(UserSecret.user_id == bindparam("user_id"))
)


def read(session: Session, user_id: str) -> tuple[bytes | None, list[Fingerprint]]:
    """The user's secret (None: never purged anything) and fingerprints, one statement."""
    rows = session.execute(_READ, {"user_id": user_id}).all()
    if not rows:
        return None, []
    prints = [
        Fingerprint(frozenset(words), text, 1 if polarity > 0 else -1)
        for _, words, text, polarity in rows
        if text is not None
    ]
    return bytes.fromhex(rows[0][0]), prints


def lift(session: Session, user_id: str) -> int:
    """Delete the user's fingerprints: purged facts may be learned again. How many."""
    result = session.execute(delete(MemoryFingerprint).where(MemoryFingerprint.user_id == user_id))
    return int(result.rowcount)  # type: ignore[attr-defined]


def count(session: Session, user_id: str) -> int:
    return int(
        session.scalar(select(func.count()).where(MemoryFingerprint.user_id == user_id)) or 0
    )
