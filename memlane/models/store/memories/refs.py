"""Short ids: each memory, episode and procedure of a user has a `ref`, a number unique
among that user's items of the three kinds (one numbering), shown in contexts in place
of the 24-hex ids a model would spend 16 tokens on. Refs are never reused, so an id a
model saw names the same item later (to pin or forget it)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from memlane.models.tables import UserState


def allocate(session: Session, user_id: str, count: int = 1) -> int:
    """The first of `count` consecutive new refs of the user. The counter row stays
    locked until the transaction ends, so two writers never take the same refs."""
    if count < 1:
        raise ValueError(f"count must be at least 1, not {count}")
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    statement = (
        insert(UserState)
        .values(user_id=user_id, next_ref=1 + count)
        .on_conflict_do_update(
            index_elements=["user_id"], set_={"next_ref": UserState.next_ref + count}
        )
        .returning(UserState.next_ref)
    )
    return int(session.execute(statement).scalar_one()) - count


def issued(session: Session, user_id: str) -> int:
    """How many refs the user has been given: their items of all time, live or not."""
    number = session.scalar(select(UserState.next_ref).where(UserState.user_id == user_id))
    return 0 if number is None else int(number) - 1


def parse(identifier: str) -> int | None:
    """The ref a short id names ("12"), or None when it is a full id ("mem_…")."""
    text = identifier.strip()
    if text.isascii() and text.isdigit() and len(text) <= 9:
        return int(text)
    return None
