"""The context assembler: items read from the store → one budgeted XML block and its pack.

Pure: the store read, the clock (`now`), the encoding and the relevance scores come in.

Rules, in the order they are applied:
1. Safety: only the asking user's items; memories must be active, not expired
   (expires_at <= now is expired) and not sensitive unless asked for. A memory id read
   twice counts once.
2. Always in: the soul blocks (identity, style, anti_patterns) and the pinned memories.
   If they alone (with the XML around them) exceed the budget: BudgetError, over by N.
3. Memories section, in this order: pinned (created_at desc, then id), verified (created_at
   desc, then id), candidates (the strategy's rank: score desc, then id).
   - verified go in while the whole budget holds them; each one left out is the event
     `verified_item_dropped` (they may use more than the memories' share: dropping one is
     a last resort);
   - candidates go in, best first, while the memories section (wrapper and all items)
     stays within memory_share × (budget − root − soul section); a candidate that does
     not fit is skipped whole and the next is tried. Eligible candidates of which none
     went in are the event `no_candidates_fit`.
4. Episodes (newest first), then procedures matching the query, in what is left of the
   whole budget: what the memories did not use flows on, in section order.
5. Accounting: each rendered line is counted once (cached by line); lines, section
   wrappers and the root add up to the document's count because every line ends in `>`
   + newline (see context_format). The finished string is then counted exactly; should it
   ever exceed the budget, the lowest-ranked candidates, then procedures, then episodes,
   then verified memories (with events) are removed until it fits (drop reason
   "recount"), and the count is repeated. So used_tokens == count(text) <= budget.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

import tiktoken

from models.schemas import SOUL_KINDS, EpisodeRecord, MemoryRecord, Procedure, SoulBlock, Tier
from pipeline import context_format as fmt
from pipeline.assembly_types import (
    AssembledContext,
    AssemblyInput,
    ContextPack,
    DropReason,
    ItemSection,
    PackEvent,
    PackItem,
    ScoreComponents,
)
from pipeline.budget import validate_budget
from pipeline.errors import BudgetError
from pipeline.scoring import RankedMemory, rank

_PACK_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "memlane:context-pack")
_WORD = re.compile(r"\w+")
_Record = TypeVar("_Record", SoulBlock, EpisodeRecord, Procedure)


@lru_cache(maxsize=65_536)
def _tokens(encoding: tiktoken.Encoding, line: str) -> int:
    return len(encoding.encode_ordinary(line))


@dataclass(slots=True)
class _Entry:
    """One considered item: its rendered line, its cost and the decision about it."""

    id: str
    section: fmt.SectionName
    kind: ItemSection
    line: str
    tokens: int
    tier: Tier | None = None
    ranked: RankedMemory | None = None
    included: bool = False
    drop_reason: DropReason | None = None


class _Budget:
    """Running token account: the root, each non-empty section's wrapper, each line."""

    def __init__(self, encoding: tiktoken.Encoding, user_id: str, budget: int) -> None:
        self.budget = budget
        self.used = _tokens(encoding, fmt.root_open(user_id)) + _tokens(encoding, fmt.ROOT_CLOSE)
        self.section_used: dict[fmt.SectionName, int] = {}
        self._wrapper = {
            name: _tokens(encoding, fmt.section_open(name))
            + _tokens(encoding, fmt.section_close(name))
            for name in fmt.SECTION_ORDER
        }

    def cost(self, entry: _Entry) -> int:
        """Tokens the entry adds: its line, plus its section's wrapper if it is the first."""
        opened = entry.section in self.section_used
        return entry.tokens + (0 if opened else self._wrapper[entry.section])

    def take(self, entry: _Entry) -> None:
        cost = self.cost(entry)
        self.used += cost
        self.section_used[entry.section] = self.section_used.get(entry.section, 0) + cost
        entry.included = True


def assemble_context(request: AssemblyInput) -> AssembledContext:
    """Assemble the context block for one model call (rules in the module docstring)."""
    budget_tokens = validate_budget(request.budget_tokens)
    if not 0.0 <= request.memory_share <= 1.0:
        raise ValueError(f"memory_share must be in [0, 1], not {request.memory_share!r}")
    encoding, user_id = request.encoding, request.user_id

    memories, rejected = _eligible_memories(request)
    ranked = rank(
        memories,
        strategy=request.strategy,
        now=request.now,
        relevance=dict(request.relevance),
        weights=request.weights,
        half_life_hours=request.half_life_hours,
    )

    def memory_entry(item: RankedMemory) -> _Entry:
        line = fmt.memory_line(item.memory)
        memory = item.memory
        return _Entry(
            memory.id, "memories", "memory", line, _tokens(encoding, line), memory.tier, item
        )

    newest_first = _newest_first(ranked)
    pinned = [memory_entry(r) for r in newest_first if r.memory.tier == "pinned"]
    verified = [memory_entry(r) for r in newest_first if r.memory.tier == "verified"]
    candidates = [memory_entry(r) for r in ranked if r.memory.tier == "candidate"]
    soul_blocks, episode_records = _soul_blocks(request), _episodes(request)
    procedure_records = _matching_procedures(request)
    soul = [
        _line_entry(b, f"soul:{b.kind}", "soul", "soul", fmt.soul_line, encoding)
        for b in soul_blocks
    ]
    episodes = [
        _line_entry(e, e.id, "episodes", "episode", fmt.episode_line, encoding)
        for e in episode_records
    ]
    procedures = [
        _line_entry(p, p.id, "procedures", "procedure", fmt.procedure_line, encoding)
        for p in procedure_records
    ]

    account = _Budget(encoding, user_id, budget_tokens)
    for entry in soul:
        account.take(entry)
    left_after_soul = budget_tokens - account.used
    for entry in pinned:
        account.take(entry)
    if account.used > budget_tokens:
        raise _over_budget(budget_tokens, account.used)

    events: list[PackEvent] = []
    for entry in verified:
        if account.used + account.cost(entry) <= budget_tokens:
            account.take(entry)
        else:
            _drop(entry, "over_budget", events)

    memory_cap = math.floor(request.memory_share * left_after_soul)
    for entry in candidates:
        cost = account.cost(entry)
        if account.used + cost > budget_tokens:
            entry.drop_reason = "over_budget"
        elif account.section_used.get("memories", 0) + cost > memory_cap:
            entry.drop_reason = "over_memory_share"
        else:
            account.take(entry)

    for entry in [*episodes, *procedures]:
        if account.used + account.cost(entry) <= budget_tokens:
            account.take(entry)
        else:
            entry.drop_reason = "over_budget"

    sections: list[list[_Entry]] = [soul, [*pinned, *verified, *candidates], episodes, procedures]
    removable = [
        *reversed(candidates),
        *reversed(procedures),
        *reversed(episodes),
        *reversed(verified),
    ]
    text, used_tokens = _render_within_budget(
        user_id, sections, removable, budget_tokens, encoding, events
    )

    if candidates and not any(entry.included for entry in candidates):
        events.append(PackEvent(type="no_candidates_fit"))
    included = [e for section in sections for e in section if e.included]
    selection = fmt.Selection(
        user_id=user_id,
        soul=[b for b, e in zip(soul_blocks, soul, strict=True) if e.included],
        memories=[e.ranked.memory for e in included if e.ranked is not None],
        episodes=[r for r, e in zip(episode_records, episodes, strict=True) if e.included],
        procedures=[r for r, e in zip(procedure_records, procedures, strict=True) if e.included],
    )
    items = [_pack_item(e) for section in sections for e in section]
    items += [
        PackItem(id=m.id, section="memory", tier=m.tier, included=False, drop_reason=reason)
        for m, reason in rejected
    ]
    reasons = Counter(item.drop_reason for item in items if item.drop_reason is not None)
    digest = hashlib.sha256(text.encode()).hexdigest()
    key = json.dumps(
        [user_id, request.query, request.now.isoformat(), request.strategy, budget_tokens, digest]
    )
    pack = ContextPack(
        pack_id=f"pack_{uuid.uuid5(_PACK_NAMESPACE, key).hex}",
        user_id=user_id,
        query=request.query,
        assembled_at=request.now,
        strategy=request.strategy,
        budget_tokens=budget_tokens,
        used_tokens=used_tokens,
        items=items,
        dropped_count=sum(1 for item in items if not item.included),
        drop_reasons=dict(sorted(reasons.items())),
        events=events,
        retrieval_mode=request.retrieval_mode,
    )
    return AssembledContext(
        text=text,
        json=fmt.as_json(selection),
        pack=pack,
        included_memory_ids=[m.id for m in selection.memories],
    )


def _render_within_budget(
    user_id: str,
    sections: list[list[_Entry]],
    removable: list[_Entry],
    budget: int,
    encoding: tiktoken.Encoding,
    events: list[PackEvent],
) -> tuple[str, int]:
    """Render the included entries and count the string exactly; while it is over the
    budget, remove entries in `removable` order, at least as many tokens as it is over
    (bounded: each round removes one entry or more, or raises)."""
    while True:
        text = fmt.render_document(
            user_id,
            {
                name: [e.line for e in entries if e.included]
                for name, entries in zip(fmt.SECTION_ORDER, sections, strict=True)
            },
        )
        used = len(encoding.encode_ordinary(text))
        if used <= budget:
            return text, used
        still_in = [e for e in removable if e.included]
        if not still_in:
            raise _over_budget(budget, used)
        freed = 0
        for entry in still_in:
            entry.included = False
            _drop(entry, "recount", events)
            freed += entry.tokens
            if freed >= used - budget:
                break


def _drop(entry: _Entry, reason: DropReason, events: list[PackEvent]) -> None:
    entry.drop_reason = reason
    if entry.tier == "verified":
        events.append(PackEvent(type="verified_item_dropped", id=entry.id))


def _over_budget(budget: int, required: int) -> BudgetError:
    return BudgetError(
        f"the soul blocks and pinned memories alone need {required:,} tokens but the budget "
        f"is {budget:,} (over by {required - budget:,}): raise the budget or unpin memories",
        budget=budget,
        required=required,
    )


def _eligible_memories(
    request: AssemblyInput,
) -> tuple[list[MemoryRecord], list[tuple[MemoryRecord, DropReason]]]:
    """This user's memories split into usable ones and left-out ones with the reason.
    Other users' memories are neither: they must not even appear in the pack."""
    seen: set[str] = set()
    usable: list[MemoryRecord] = []
    rejected: list[tuple[MemoryRecord, DropReason]] = []
    for memory in request.memories:
        if memory.user_id != request.user_id or memory.id in seen:
            continue
        seen.add(memory.id)
        reason: DropReason | None = None
        if memory.status == "superseded":
            reason = "superseded"
        elif memory.status == "quarantined":
            reason = "quarantined"
        elif memory.status == "deleted":
            reason = "deleted"
        elif memory.expires_at is not None and memory.expires_at <= request.now:
            reason = "expired"
        elif memory.sensitive and not request.include_sensitive:
            reason = "sensitive"
        if reason is None:
            usable.append(memory)
        else:
            rejected.append((memory, reason))
    rejected.sort(key=lambda pair: pair[0].id)
    return usable, rejected


def _newest_first(ranked: Iterable[RankedMemory]) -> list[RankedMemory]:
    by_id = sorted(ranked, key=lambda r: r.memory.id)
    return sorted(by_id, key=lambda r: r.memory.created_at, reverse=True)


def _soul_blocks(request: AssemblyInput) -> list[SoulBlock]:
    mine = [b for b in request.soul_blocks if b.user_id == request.user_id]
    return sorted(mine, key=lambda b: (SOUL_KINDS.index(b.kind), b.content))


def _episodes(request: AssemblyInput) -> list[EpisodeRecord]:
    mine = sorted((e for e in request.episodes if e.user_id == request.user_id), key=lambda e: e.id)
    return sorted(mine, key=lambda e: e.created_at, reverse=True)


def _matching_procedures(request: AssemblyInput) -> list[Procedure]:
    """Procedures matching the query, most shared words first, then by id."""
    mine = [p for p in request.procedures if p.user_id == request.user_id]
    if request.procedure_ids is not None:
        return sorted((p for p in mine if p.id in request.procedure_ids), key=lambda p: p.id)
    words = {w for w in _WORD.findall((request.query or "").lower()) if len(w) >= 3}
    scored = []
    for procedure in mine:
        terms = {k.lower() for k in procedure.keywords} | set(_WORD.findall(procedure.name.lower()))
        shared = len(words & terms)
        if shared:
            scored.append((-shared, procedure.id, procedure))
    return [procedure for _, _, procedure in sorted(scored, key=lambda t: t[:2])]


def _line_entry(
    item: _Record,
    item_id: str,
    section: fmt.SectionName,
    kind: ItemSection,
    render: Callable[[_Record], str],
    encoding: tiktoken.Encoding,
) -> _Entry:
    line = render(item)
    return _Entry(item_id, section, kind, line, _tokens(encoding, line))


def _pack_item(entry: _Entry) -> PackItem:
    ranked = entry.ranked
    components = None
    if ranked is not None:
        b = ranked.breakdown
        components = ScoreComponents(
            relevance=b.relevance,
            importance=b.importance,
            recency=b.recency,
            frequency=b.frequency,
            composite=b.composite,
        )
    return PackItem(
        id=entry.id,
        section=entry.kind,
        tier=entry.tier,
        score=ranked.score if ranked is not None else None,
        components=components,
        tokens=entry.tokens,
        included=entry.included,
        drop_reason=entry.drop_reason,
    )
