"""The texts of a context pack's items, read back for `memlane packs show`: a pack keeps
ids, scores and reasons, not contents (it is written on every assembly, and the texts
are in the store already)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from memlane.models.tables import EpisodeRow, MemoryRow, ProcedureRow, SoulBlockRow

SOUL_PREFIX = "soul:"  # a soul block's item id is soul:<kind> (pipeline.assembly.assembler)


def item_texts(
    session: Session, user_id: str, items: Iterable[Mapping[str, Any]]
) -> dict[str, str]:
    """Item id → its text as stored now, for the pack items (`id` and `section` each) of
    `user_id`; an item since purged or erased has none."""
    wanted: dict[str, list[str]] = {}
    for item in items:
        wanted.setdefault(str(item["section"]), []).append(str(item["id"]))
    texts: dict[str, str] = {}
    if ids := wanted.get("memory"):
        rows = session.execute(
            select(MemoryRow.id, MemoryRow.content).where(
                MemoryRow.user_id == user_id, MemoryRow.id.in_(ids)
            )
        )
        texts.update({item_id: text for item_id, text in rows})
    if ids := wanted.get("episode"):
        rows = session.execute(
            select(EpisodeRow.id, EpisodeRow.summary).where(
                EpisodeRow.user_id == user_id, EpisodeRow.id.in_(ids)
            )
        )
        texts.update({item_id: text for item_id, text in rows})
    if ids := wanted.get("procedure"):
        found = session.execute(
            select(ProcedureRow.id, ProcedureRow.name, ProcedureRow.content).where(
                ProcedureRow.user_id == user_id, ProcedureRow.id.in_(ids)
            )
        )
        texts.update({item_id: f"{name}: {content}" for item_id, name, content in found})
    if ids := wanted.get("soul"):
        kinds = [item_id.removeprefix(SOUL_PREFIX) for item_id in ids]
        blocks = session.execute(
            select(SoulBlockRow.kind, SoulBlockRow.content).where(
                SoulBlockRow.user_id == user_id, SoulBlockRow.kind.in_(kinds)
            )
        )
        texts.update({SOUL_PREFIX + kind: text for kind, text in blocks})
    return texts
