"""A stored context pack as the inspector shows it: every candidate with its texts as
stored now, its scores, tokens and fate (memlane.service.inspector.fates), and the
included items laid out as the context held them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select

from memlane.models.db import unit_of_work
from memlane.models.store.reads import pack_texts
from memlane.models.store.users import packs
from memlane.models.tables import ContextPackRow
from memlane.pipeline.errors import NotFoundError
from memlane.service.inspector.fates import Candidate, candidate, floor_of

_SECTIONS = {"soul": "soul", "memory": "memories", "episode": "episodes", "procedure": "procedures"}


@dataclass(frozen=True, slots=True)
class PackView:
    pack_id: str
    user_id: str
    query: str | None
    assembled_at: datetime
    strategy: str
    style: str
    retrieval_mode: str
    budget_tokens: int
    used_tokens: int
    candidates: list[Candidate]
    drop_reasons: dict[str, int] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    xml: str | None = None  # the context itself, when the view was built from one

    @property
    def fates(self) -> dict[str, int]:
        counted: dict[str, int] = {}
        for row in self.candidates:
            counted[row.fate] = counted.get(row.fate, 0) + 1
        return counted

    def layout(self) -> str:
        """The included items by section, as stored now: a stored pack keeps ids, not
        the context's text, so this is the context rebuilt from today's texts."""
        lines = [f'<memlane_context user="{self.user_id}">']
        for section, name in _SECTIONS.items():
            rows = [r for r in self.candidates if r.included and r.section == section]
            if rows:
                lines.append(f"  <{name}>")
                lines += [f"    [{r.label}] {r.text or '(purged)'}" for r in rows]
                lines.append(f"  </{name}>")
        lines.append("</memlane_context>")
        return "\n".join(lines)


def _moment(value: datetime | str) -> datetime:
    """A pack's time: a datetime in an assembly's pack data, ISO text in a stored one."""
    return value if isinstance(value, datetime) else datetime.fromisoformat(value)


def view_of(
    pack: Mapping[str, Any],
    texts: Mapping[str, str],
    *,
    relevance_floor: float,
    xml: str | None = None,
) -> PackView:
    """The view of a pack as data (a stored pack's body, or an assembly's pack_data)."""
    items: list[Mapping[str, Any]] = list(pack.get("items", []))
    floor = (
        floor_of([i for i in items if i.get("section") == "memory"], relevance_floor)
        if pack.get("query")
        else None
    )
    return PackView(
        pack_id=str(pack["pack_id"]),
        user_id=str(pack["user_id"]),
        query=pack.get("query"),
        assembled_at=_moment(pack["assembled_at"]),
        strategy=str(pack.get("strategy", "")),
        style=str(pack.get("style", "default")),
        retrieval_mode=str(pack.get("retrieval_mode", "")),
        budget_tokens=int(pack.get("budget_tokens", 0)),
        used_tokens=int(pack.get("used_tokens", 0)),
        candidates=[candidate(item, texts.get(str(item["id"])), floor) for item in items],
        drop_reasons=dict(pack.get("drop_reasons", {})),
        events=[dict(e) for e in pack.get("events", [])],
        xml=xml,
    )


def stored_pack(url: str, pack_id: str, *, relevance_floor: float) -> PackView:
    """A stored pack's view; NotFoundError when there is no such pack."""
    with unit_of_work(url) as session:
        pack = packs.get_pack(session, pack_id)
        texts = pack_texts.item_texts(session, pack["user_id"], pack.get("items", []))
    return view_of(pack, texts, relevance_floor=relevance_floor)


def pack_owner(url: str, pack_id: str) -> str:
    """The user a stored pack belongs to (NotFoundError: none), read before the pack
    itself so a page can check the viewer may see that user first."""
    with unit_of_work(url) as session:
        owner = session.scalar(select(ContextPackRow.user_id).where(ContextPackRow.id == pack_id))
    if owner is None:
        raise NotFoundError(f"no context pack {pack_id!r}")
    return str(owner)
