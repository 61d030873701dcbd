"""API keys' rows (the `api_keys` table): written by `memlane keys` and POST /v1/keys,
read by the key check of every request (memlane/service/keys/keyring.py)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from memlane.models.tables import ApiKeyRow


def add_key(session: Session, row: ApiKeyRow) -> ApiKeyRow:
    session.add(row)
    session.flush()
    return row


def key_by_id(session: Session, key_id: str) -> ApiKeyRow | None:
    return session.get(ApiKeyRow, key_id)


def keys_named(session: Session, name_or_id: str) -> list[ApiKeyRow]:
    """The rows whose name or id is `name_or_id`, oldest first."""
    query = select(ApiKeyRow).where(or_(ApiKeyRow.name == name_or_id, ApiKeyRow.id == name_or_id))
    return list(session.scalars(query.order_by(ApiKeyRow.created_at, ApiKeyRow.id)))


def all_keys(session: Session) -> list[ApiKeyRow]:
    return list(session.scalars(select(ApiKeyRow).order_by(ApiKeyRow.name, ApiKeyRow.created_at)))


def any_key_exists(session: Session) -> bool:
    """Whether any key was ever made: the API is open only before the first (revoking
    or letting every key expire must not open it again)."""
    return session.scalars(select(ApiKeyRow.id).limit(1)).first() is not None


def touch(session: Session, key_id: str, *, now: datetime) -> None:
    """Record a use (callers write this at most once a minute per key and process)."""
    session.execute(update(ApiKeyRow).where(ApiKeyRow.id == key_id).values(last_used_at=now))
