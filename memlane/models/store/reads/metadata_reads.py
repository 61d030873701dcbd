"""Metadata read for assembly: what a working set holds beside its view (the metadata
of a user's active memories and episodes, only those that have some), and which of a
store read's episodes pass a filter."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Session

from memlane.models.store import metadata_sql
from memlane.models.tables import EpisodeRow, MemoryRow
from memlane.pipeline.metadata.filters import Filter

Interned = dict[str, dict[str, Any]]


def _some(column: Any, postgres: bool) -> Any:
    if postgres:
        return sa.type_coerce(column, JSONB) != sa.cast(sa.literal("{}", sa.Text), JSONB)
    return sa.type_coerce(column, sa.Text) != "{}"


def share(metadata: dict[str, Any], interned: Interned) -> dict[str, Any]:
    """One object for equal metadata (pipeline.metadata.masks counts on it)."""
    key = json.dumps(metadata, sort_keys=True)
    return interned.setdefault(key, metadata)


def item_metadata(session: Session, user_id: str, interned: Interned) -> dict[str, dict[str, Any]]:
    """The metadata of the user's active memories and their episodes, by item id: those
    with any."""
    postgres = session.get_bind().dialect.name == "postgresql"
    found: dict[str, dict[str, Any]] = {}
    for table, visible in (
        (MemoryRow, MemoryRow.status == "active"),
        (EpisodeRow, sa.true()),
    ):
        rows = session.execute(
            sa.select(table.id, table.meta).where(
                table.user_id == user_id, visible, _some(table.meta, postgres)
            )
        )
        for item_id, metadata in rows:
            found[item_id] = share(metadata, interned)
    return found


def passing_episodes(
    session: Session, user_id: str, among: Collection[str], where: Filter
) -> set[str]:
    """The ids of `among` (the user's episodes) whose metadata passes `where`."""
    if not among:
        return set()
    dialect = session.get_bind().dialect.name
    return set(
        session.scalars(
            sa.select(EpisodeRow.id).where(
                EpisodeRow.user_id == user_id,
                EpisodeRow.id.in_(sorted(among)),
                metadata_sql.condition(EpisodeRow.meta, where, dialect=dialect),
            )
        )
    )
