"""A context pack as the inspector shows it: how many candidates met each fate
(memlane.service.inspector.fates), one page of the candidates' table (their texts as
stored now, scores, tokens and fates; filtered by fate), and the included items laid out
as the context held them. A pack may hold 10,000 candidates: fates are counted for all,
texts read and rows built for the page shown only."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select

from memlane.models.db import unit_of_work
from memlane.models.store.reads import pack_texts
from memlane.models.store.users import packs
from memlane.models.tables import ContextPackRow
from memlane.pipeline.errors import NotFoundError
from memlane.service.inspector.fates import Candidate, candidate, fate_of, floor_of

PAGE_ROWS = 200  # candidates a page shows
_SECTIONS = {"soul": "soul", "memory": "memories", "episode": "episodes", "procedure": "procedures"}

Item = Mapping[str, Any]
Texts = Callable[[Sequence[Item]], Mapping[str, str]]


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
    fates: dict[str, int]  # every candidate's fate, counted
    included: list[Candidate]  # what went in, in the pack's order
    rows: list[Candidate]  # the page of the table
    matched: int  # candidates of the fate asked for (all, when none)
    offset: int  # the page's first row among them
    fate: str  # the fate asked for ("" for all)
    items: list[Item] = field(repr=False)  # the pack's items, for a search of them all
    floor: float | None = None
    drop_reasons: dict[str, int] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    xml: str | None = None  # the context itself, when the view was built from one

    @property
    def total(self) -> int:
        return len(self.items)

    @property
    def next_offset(self) -> int | None:
        after = self.offset + len(self.rows)
        return after if after < self.matched else None

    @property
    def previous_offset(self) -> int | None:
        return max(self.offset - PAGE_ROWS, 0) if self.offset > 0 else None

    def layout(self) -> str:
        """The included items by section, as stored now: a stored pack keeps ids, not
        the context's text, so this is the context rebuilt from today's texts."""
        lines = [f'<memlane_context user="{self.user_id}">']
        for section, name in _SECTIONS.items():
            rows = [r for r in self.included if r.section == section]
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
    texts: Texts,
    *,
    relevance_floor: float,
    fate: str = "",
    offset: int = 0,
    focus: str | None = None,
    xml: str | None = None,
) -> PackView:
    """The view of a pack as data (a stored pack's body, or an assembly's pack data):
    the page of `fate`'s candidates from `offset`, or the page holding `focus` (an
    item id). `texts` reads the texts of the items it is given."""
    items: list[Item] = list(pack.get("items", []))
    floor = None
    if pack.get("query"):
        floor = floor_of([i for i in items if i.get("section") == "memory"], relevance_floor)
    fates = [fate_of(item, floor) for item in items]
    chosen = [i for i, name in enumerate(fates) if not fate or name == fate]
    if focus is not None:
        at = next((n for n, i in enumerate(chosen) if items[i]["id"] == focus), None)
        if at is not None:
            offset = at - at % PAGE_ROWS
    offset = max(0, min(offset, max(len(chosen) - 1, 0)))
    page = [items[i] for i in chosen[offset : offset + PAGE_ROWS]]
    included = [item for item in items if item.get("included")]
    read = texts([*page, *included]) if page or included else {}
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
        fates=dict(Counter(fates)),
        included=[candidate(item, read.get(str(item["id"])), floor) for item in included],
        rows=[candidate(item, read.get(str(item["id"])), floor) for item in page],
        matched=len(chosen),
        offset=offset,
        fate=fate,
        items=items,
        floor=floor,
        drop_reasons=dict(pack.get("drop_reasons", {})),
        events=[dict(e) for e in pack.get("events", [])],
        xml=xml,
    )


def texts_reader(url: str, user_id: str) -> Texts:
    """Reads items' texts as stored now (models.store.reads.pack_texts), one query."""

    def read(items: Sequence[Item]) -> Mapping[str, str]:
        with unit_of_work(url) as session:
            return pack_texts.item_texts(session, user_id, items)

    return read


def read_pack(url: str, pack_id: str) -> dict[str, Any]:
    """A stored pack's body; NotFoundError when there is no such pack."""
    with unit_of_work(url) as session:
        return packs.get_pack(session, pack_id)


def pack_owner(url: str, pack_id: str) -> str:
    """The user a stored pack belongs to (NotFoundError: none), read before the pack
    itself so a page can check the viewer may see that user first."""
    with unit_of_work(url) as session:
        owner = session.scalar(select(ContextPackRow.user_id).where(ContextPackRow.id == pack_id))
    if owner is None:
        raise NotFoundError(f"no context pack {pack_id!r}")
    return str(owner)


def stored_pack(url: str, pack_id: str, *, relevance_floor: float) -> PackView:
    """A stored pack's first page of candidates, all fates."""
    body = read_pack(url, pack_id)
    return view_of(body, texts_reader(url, str(body["user_id"])), relevance_floor=relevance_floor)
