"""Context packs: what each assembly kept and dropped and why, saved in the background
(service/background.py) and read back by id."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    String,
    Text,
    bindparam,
    cast,
    exists,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from memlane.models.store.memories import memories
from memlane.models.store.users import erasures
from memlane.models.tables import (
    UTC_DT,
    ContextPackRow,
    Erasure,
)
from memlane.pipeline.errors import NotFoundError


def save_packs(
    session: Session, packs: Sequence[tuple[str, str, datetime, str]], *, now: datetime
) -> None:
    """(pack id, user id, assembled at, body as JSON text) each, in one statement run for
    all: the body goes in as the text it already is (a pack is ~70 KB of JSON at a 4,000
    token budget; serialising it twice was half the background writer's work, and that
    work competes with assemblies for the interpreter). Idempotent: the same pack saved
    twice is one row. A pack of a user erased less than erasures.FENCE before `now` is
    not saved (models/store/users/erasures.py)."""
    if not packs:
        return
    postgres = session.get_bind().dialect.name == "postgresql"
    if postgres:
        # Shared, so packs never wait on each other, only on the user's writers (erase).
        keys = sorted({memories.user_lock_key(user_id) for _, user_id, _, _ in packs})
        session.execute(
            text("SELECT pg_advisory_xact_lock_shared(k) FROM unnest(CAST(:keys AS bigint[])) k"),
            {"keys": keys},
        )
    insert: Any = pg_insert if postgres else sqlite_insert
    text_body = bindparam("body", type_=Text)
    fenced = exists().where(
        Erasure.user_key == bindparam("user_key"),
        Erasure.erased_at > bindparam("fenced_since", type_=UTC_DT),
    )
    row = select(
        bindparam("id", type_=String),
        bindparam("user_id", type_=String),
        bindparam("assembled_at", type_=UTC_DT),
        cast(text_body, JSON) if postgres else text_body,
    ).where(~fenced)
    statement = (
        insert(ContextPackRow.__table__)
        .from_select(["id", "user_id", "assembled_at", "body"], row)
        .on_conflict_do_nothing()
    )
    since = now - erasures.FENCE
    # on the Core connection: the ORM's bulk INSERT does not take INSERT ... SELECT
    session.connection().execute(
        statement,
        [
            {
                "id": pack_id,
                "user_id": user_id,
                "assembled_at": at,
                "body": body,
                "user_key": erasures.user_key(user_id),
                "fenced_since": since,
            }
            for pack_id, user_id, at, body in packs
        ],
    )


def get_pack(session: Session, pack_id: str) -> dict[str, Any]:
    row = session.get(ContextPackRow, pack_id)
    if row is None:
        raise NotFoundError(
            f"no context pack {pack_id!r} (packs are saved in the background; "
            "it may not have been written yet)"
        )
    return dict(row.body)
