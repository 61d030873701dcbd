"""The context assembler: items read from the store → one budgeted XML block and its pack.

Pure: the store read, the clock (`now`), the encoding and the relevance scores come in.

Rules, in the order they are applied:
1. Safety (assembly_filters): only the asking user's items; memories active, not expired,
   not sensitive unless asked for.
2. Always in: the soul blocks and the pinned memories. If they alone (with the XML around
   them) exceed the budget: BudgetError, saying by how much.
3. Verified memories (created_at desc, then id) go in while the whole budget holds them;
   each one left out is the event `verified_item_dropped` (a last resort).
4. With a query (strategy `scored` and relevance given), everything else competes for
   what is left on its relevance to the query: candidate memories, episodes and the
   procedures that share a word with it (relevance > 0) form one pool. Each has its
   relevance r (pipeline.relevance; 0 when none was given) and its composite score
   (pipeline.scoring; an episode or procedure scores as a memory of importance 0.5 and
   frequency 0, dated by its own date). The pool is walked in this order: first the
   items about as relevant as the best one (r ≥ relevance_floor × the pool's best r,
   default 0.8), by composite, so importance, recency and confirmations decide among
   them; then the rest by relevance (composite, then section, then id break ties). Each
   item goes in when it fits what is left of the whole budget and is skipped whole
   otherwise. So what one section leaves unused the others take, an item that fits is
   never left out while budget stays unused, and an item below the floor never
   displaces one above it: a memory said yesterday, important and often confirmed,
   cannot push out the one the question is about.
5. Without a query (or with another strategy) the seed's shares apply: candidate
   memories, best by the strategy first, while the memories section stays within
   floor(memory_share × (budget − root − soul section)); then episodes (newest first)
   and the procedures matching the query, each skipped whole if it does not fit what is
   left of the whole budget.
   Candidates of which none went in are the event `no_candidates_fit`. The rendered
   order is always soul → memories (pinned, verified, then the rest by rank) → episodes
   → procedures.
6. Accounting: each rendered line is counted once (cached by line) and lines, section
   wrappers and the root add up to the document's count, since every line ends in `>` +
   newline (see context_format). For the encodings whose pre-tokeniser is known to
   split there (`ADDITIVE_PATTERNS`: tiktoken's cl100k_base, o200k_base and p50k_base;
   test_context_format checks it for any content), that sum is the exact count of the
   finished string. Any other encoding's finished string is counted whole; should it
   be over the budget, the lowest-ranked items, then verified memories (oldest first,
   with events) are removed until it fits (drop reason "recount"). So
   used_tokens == count(text) <= budget, always.

The pack comes back as plain data (`AssembledContext.pack_data`, every field of
ContextPack and its items; test_assembly checks it equals the model's dump): building
the ContextPack model on every call would add about a third to the assembler's own time
(bench/README.md), and the pack writer wants plain data, so the model is built only
when asked for.

Over 400 lines: the rules above are applied here in their order, one function each, so
the whole walk reads top to bottom; the filters, the format and the pack's types are in
assembly_filters, context_format and assembly_types.
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Generic, TypeVar

import tiktoken

from memlane.pipeline import assembly_filters as filters
from memlane.pipeline import context_format as fmt
from memlane.pipeline.assembly_types import (
    AssembledContext,
    AssemblyInput,
    DropReason,
    ItemSection,
    PackData,
    PackEvent,
)
from memlane.pipeline.budget import validate_budget
from memlane.pipeline.errors import BudgetError
from memlane.pipeline.records import EpisodeRecord, MemoryRecord, Procedure, SoulBlock, Tier
from memlane.pipeline.scoring import (
    ITEM_IMPORTANCE,
    RankedMemory,
    ScoreBreakdown,
    rank,
    score_item,
)
from memlane.pipeline.tokens import ENCODING_SPECS

_PACK_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "memlane:context-pack")
_R = TypeVar("_R", SoulBlock, MemoryRecord, EpisodeRecord, Procedure)

# Pre-tokenisers that always end a piece at `>` + newline before `<` (see rule 5).
ADDITIVE_PATTERNS = frozenset(spec.pat_str for spec in ENCODING_SPECS.values())


def _additive(encoding: tiktoken.Encoding) -> bool:
    return getattr(encoding, "_pat_str", None) in ADDITIVE_PATTERNS


@lru_cache(maxsize=65_536)
def _tokens(encoding: tiktoken.Encoding, line: str) -> int:
    return len(encoding.encode_ordinary(line))


@dataclass(slots=True)
class _Entry(Generic[_R]):
    """One considered item: its record, rendered line, cost, score and the decision."""

    record: _R
    id: str
    ref: int | None
    section: fmt.SectionName
    kind: ItemSection
    line: str
    tokens: int
    score: float | None = None  # the strategy's value for memories, the composite in a pool
    breakdown: ScoreBreakdown | None = None
    included: bool = False
    drop_reason: DropReason | None = None
    tier: Tier | None = None  # a memory's; read for every entry, so kept, not derived


_AnyEntry = _Entry[SoulBlock] | _Entry[MemoryRecord] | _Entry[EpisodeRecord] | _Entry[Procedure]


def _memory_entry(
    item: RankedMemory, encoding: tiktoken.Encoding, style: fmt.Style
) -> _Entry[MemoryRecord]:
    m = item.memory
    line = fmt.memory_line(m, style)
    return _Entry(
        m,
        m.id,
        m.ref,
        "memories",
        "memory",
        line,
        _tokens(encoding, line),
        item.score,
        item.breakdown,
        tier=m.tier,
    )


class _Account:
    """Running token count: the root, each non-empty section's wrapper, each line."""

    def __init__(self, encoding: tiktoken.Encoding, user_id: str) -> None:
        self.used = _tokens(encoding, fmt.root_open(user_id)) + _tokens(encoding, fmt.ROOT_CLOSE)
        self.section_used: dict[fmt.SectionName, int] = {}
        self._wrapper = {
            name: _tokens(encoding, fmt.section_open(name))
            + _tokens(encoding, fmt.section_close(name))
            for name in fmt.SECTION_ORDER
        }

    def copy(self) -> _Account:
        twin = object.__new__(_Account)
        twin.used, twin.section_used, twin._wrapper = (
            self.used,
            dict(self.section_used),
            self._wrapper,
        )
        return twin

    def cost(self, entry: _AnyEntry) -> int:
        """Tokens the entry adds: its line, plus its section's wrapper if it is the first."""
        return entry.tokens + (
            0 if entry.section in self.section_used else self._wrapper[entry.section]
        )

    def take(self, entry: _AnyEntry) -> None:
        cost = self.cost(entry)
        self.used += cost
        self.section_used[entry.section] = self.section_used.get(entry.section, 0) + cost
        entry.included = True


def assemble_context(request: AssemblyInput) -> AssembledContext:
    """Assemble the context block for one model call (rules in the module docstring)."""
    budget = validate_budget(request.budget_tokens)
    if not 0.0 <= request.memory_share <= 1.0:
        raise ValueError(f"memory_share must be in [0, 1], not {request.memory_share!r}")
    if not 0.0 <= request.relevance_floor <= 1.0:
        raise ValueError(f"relevance_floor must be in [0, 1], not {request.relevance_floor!r}")
    encoding, style = request.encoding, request.style
    usable, excluded = filters.split_memories(request)
    relevance = dict(request.relevance)
    by_relevance = bool(request.query) and request.strategy == "scored" and bool(relevance)
    ranked = rank(
        usable,
        strategy=request.strategy,
        now=request.now,
        relevance=relevance,
        weights=request.weights,
        half_life_hours=request.half_life_hours,
        # rule 4 orders its pool by its own key, and rules 2 and 3 by date
        ordered=not by_relevance,
    )

    def memory(item: RankedMemory) -> _Entry[MemoryRecord]:
        return _memory_entry(item, encoding, style)

    pinned = [
        memory(r) for r in filters.newest_first(r for r in ranked if r.memory.tier == "pinned")
    ]
    verified = [
        memory(r) for r in filters.newest_first(r for r in ranked if r.memory.tier == "verified")
    ]
    candidates = [memory(r) for r in ranked if r.memory.tier == "candidate"]
    soul = [
        _Entry(b, f"soul:{b.kind}", None, "soul", "soul", line, _tokens(encoding, line))
        for b in filters.soul_blocks(request)
        for line in [fmt.soul_line(b)]
    ]
    episodes = [
        _Entry(e, e.id, e.ref, "episodes", "episode", line, _tokens(encoding, line))
        for e in filters.episodes(request)
        for line in [fmt.episode_line(e, style)]
    ]
    mine = (
        [p for p in request.procedures if p.user_id == request.user_id and relevance.get(p.id)]
        if by_relevance
        else filters.matching_procedures(request)
    )
    procedures = [
        _Entry(p, p.id, p.ref, "procedures", "procedure", line, _tokens(encoding, line))
        for p in mine
        for line in [fmt.procedure_line(p, style)]
    ]

    events: list[PackEvent] = []
    account = _Account(encoding, request.user_id)
    _always_in(account, budget, soul, pinned, verified, events)
    if by_relevance:
        pool = _pool(request, relevance, candidates, episodes, procedures)
        for entry in pool:
            _take_if_it_fits(entry, account, budget, events)
        room = budget - account.used
        place = {id(entry): i for i, entry in enumerate(pool)}
        candidates.sort(key=lambda e: place[id(e)])
        episodes.sort(key=lambda e: place[id(e)])
        procedures.sort(key=lambda e: place[id(e)])
        removable: list[_AnyEntry] = [*reversed(pool), *reversed(verified)]
    else:
        room = _by_share(account, budget, request.memory_share, candidates)
        later: list[_AnyEntry] = [*episodes, *procedures]
        for entry in later:
            _take_if_it_fits(entry, account, budget, events)
        removable = [
            *reversed(candidates),
            *reversed(procedures),
            *reversed(episodes),
            *reversed(verified),
        ]

    memories = [*pinned, *verified, *candidates]
    text, used = _render_within_budget(
        request.user_id,
        (soul, memories, episodes, procedures),
        removable,
        budget,
        encoding,
        events,
        exact=account.used if _additive(encoding) else None,
    )
    walked_events = list(events)
    if candidates and not any(entry.included for entry in candidates):
        events.append(PackEvent(type="no_candidates_fit"))

    selection = fmt.Selection(
        user_id=request.user_id,
        soul=[e.record for e in soul if e.included],
        memories=[e.record for e in memories if e.included],
        episodes=[e.record for e in episodes if e.included],
        procedures=[e.record for e in procedures if e.included],
        style=style,
    )
    considered: list[_AnyEntry] = [*soul, *memories, *episodes, *procedures]
    pack = _pack(request, budget, used, text, considered, excluded, events)
    walk = None
    if by_relevance and _additive(encoding):
        best = max((_relevance(e) for e in pool), default=0.0)
        key = _pool_key(request.relevance_floor * best)
        walk = _Walk(
            request=request,
            budget=budget,
            account=account,
            soul=soul,
            pinned=pinned,
            verified=verified,
            candidates=candidates,
            episodes=episodes,
            procedures=procedures,
            seen=frozenset(m.id for m in usable) | frozenset(m.id for m, _ in excluded),
            events=walked_events,
            items=pack["items"],
            best=best,
            last=key(pool[-1]) if pool else None,
        )
    return AssembledContext(
        text=text,
        selection=selection,
        pack_data=pack,
        included_memory_ids=[m.id for m in selection.memories],
        room=room,
        walk=walk,
    )


@dataclass(frozen=True, slots=True)
class _Walk:
    """A rule-4 walk as it ended, for pipeline.walk_on to go on with: its request, what
    the account holds, the entries by section (candidates, episodes and procedures in
    the pool's order), the memory ids it saw, its events but `no_candidates_fit`, its
    pack's items, the pool's best relevance and its last entry's key."""

    request: AssemblyInput
    budget: int
    account: _Account
    soul: list[_Entry[SoulBlock]]
    pinned: list[_Entry[MemoryRecord]]
    verified: list[_Entry[MemoryRecord]]
    candidates: list[_Entry[MemoryRecord]]
    episodes: list[_Entry[EpisodeRecord]]
    procedures: list[_Entry[Procedure]]
    seen: frozenset[str]
    events: list[PackEvent]
    items: list[dict[str, object]]
    best: float
    last: tuple[bool, float, float, int, str] | None


def _always_in(
    account: _Account,
    budget: int,
    soul: Sequence[_AnyEntry],
    pinned: Sequence[_AnyEntry],
    verified: Sequence[_AnyEntry],
    events: list[PackEvent],
) -> None:
    """Rules 2 and 3 of the module docstring: soul and pinned, then verified."""
    for entry in [*soul, *pinned]:
        account.take(entry)
    if account.used > budget:
        raise _over_budget(budget, account.used, len(soul), len(pinned))
    for entry in verified:
        _take_if_it_fits(entry, account, budget, events)


def _pool(
    request: AssemblyInput,
    relevance: Mapping[str, float],
    candidates: Sequence[_Entry[MemoryRecord]],
    episodes: Sequence[_Entry[EpisodeRecord]],
    procedures: Sequence[_Entry[Procedure]],
) -> list[_AnyEntry]:
    """Rule 4's walk order: candidates, episodes and procedures, those at or above the
    relevance floor first, each part by composite score; ties by section, then id."""
    others: list[_Entry[EpisodeRecord] | _Entry[Procedure]] = [*episodes, *procedures]
    _score_others(request, relevance, others)
    scored: list[_AnyEntry] = [*candidates, *others]
    best = max((_relevance(e) for e in scored), default=0.0)
    return sorted(scored, key=_pool_key(request.relevance_floor * best))


def _score_others(
    request: AssemblyInput,
    relevance: Mapping[str, float],
    others: Sequence[_Entry[EpisodeRecord] | _Entry[Procedure]],
) -> None:
    """An episode's or a procedure's composite: a memory's of importance 0.5, frequency 0."""
    for entry in others:
        entry.breakdown = score_item(
            relevance=relevance.get(entry.id, 0.0),
            importance=ITEM_IMPORTANCE,
            stated_at=entry.record.created_at,
            confirmations=0,
            now=request.now,
            weights=request.weights,
            half_life_hours=request.half_life_hours,
        )
        entry.score = entry.breakdown.composite


_SECTION_PLACE = {name: i for i, name in enumerate(fmt.SECTION_ORDER)}


def _pool_key(floor: float) -> Callable[[_AnyEntry], tuple[bool, float, float, int, str]]:
    def key(entry: _AnyEntry) -> tuple[bool, float, float, int, str]:
        score = entry.breakdown.composite if entry.breakdown is not None else 0.0
        relevance = _relevance(entry)
        if relevance >= floor:
            return (False, -score, 0.0, _SECTION_PLACE[entry.section], entry.id)
        return (True, -relevance, -score, _SECTION_PLACE[entry.section], entry.id)

    return key


def _relevance(entry: _AnyEntry) -> float:
    return entry.breakdown.relevance if entry.breakdown is not None else 0.0


def _by_share(
    account: _Account, budget: int, memory_share: float, candidates: Sequence[_AnyEntry]
) -> int:
    """Rule 5: candidates, best first, within the memories' share; what is left of it."""
    soul_used = account.section_used.get("soul", 0)
    root = account.used - soul_used - account.section_used.get("memories", 0)
    memory_cap = math.floor(memory_share * (budget - root - soul_used))
    for entry in candidates:
        cost = account.cost(entry)
        if account.section_used.get("memories", 0) + cost > memory_cap:
            entry.drop_reason = (
                "over_budget" if account.used + cost > budget else "over_memory_share"
            )
        else:
            account.take(entry)
    return memory_cap - account.section_used.get("memories", 0)


def _take_if_it_fits(
    entry: _AnyEntry, account: _Account, budget: int, events: list[PackEvent]
) -> None:
    if account.used + account.cost(entry) <= budget:
        account.take(entry)
    else:
        _drop(entry, "over_budget", events)


def _drop(entry: _AnyEntry, reason: DropReason, events: list[PackEvent]) -> None:
    entry.included = False
    entry.drop_reason = reason
    if entry.tier == "verified":
        events.append(PackEvent(type="verified_item_dropped", id=entry.id))


def _render_within_budget(
    user_id: str,
    sections: tuple[Sequence[_AnyEntry], ...],
    removable: Sequence[_AnyEntry],
    budget: int,
    encoding: tiktoken.Encoding,
    events: list[PackEvent],
    *,
    exact: int | None,
) -> tuple[str, int]:
    """Render the included entries. `exact` is their count when the encoding is
    additive (rule 5), which the account never lets exceed the budget; otherwise the
    string is counted whole and, while it is over the budget, entries are removed in
    `removable` order, at least as many tokens as it is over, and it is counted again:
    each round removes an entry or raises, so the loop is bounded."""
    while True:
        lines = {
            name: [e.line for e in entries if e.included]
            for name, entries in zip(fmt.SECTION_ORDER, sections, strict=True)
        }
        text = fmt.render_document(user_id, lines)
        used = exact if exact is not None else len(encoding.encode_ordinary(text))
        if used <= budget:
            return text, used
        still_in = [e for e in removable if e.included]
        if not still_in:
            pinned = sum(1 for e in sections[1] if e.tier == "pinned")
            raise _over_budget(budget, used, len(sections[0]), pinned)
        freed = 0
        for entry in still_in:
            _drop(entry, "recount", events)
            freed += entry.tokens
            if freed >= used - budget:
                break
        exact = None


def _over_budget(budget: int, required: int, soul: int, pinned: int) -> BudgetError:
    return BudgetError(
        f"the {soul} soul block(s), {pinned} pinned memory(ies) and the XML around them "
        f"need {required:,} tokens but the budget is {budget:,} (over by {required - budget:,}): "
        "raise the budget, unpin memories or shorten the soul blocks",
        budget=budget,
        required=required,
    )


def _pack(
    request: AssemblyInput,
    budget: int,
    used: int,
    text: str,
    considered: Sequence[_AnyEntry],
    excluded: Sequence[tuple[MemoryRecord, DropReason]],
    events: list[PackEvent],
) -> PackData:
    """The context pack, as plain data with every field of ContextPack and PackItem
    (so it equals the model's dump)."""
    items = [*map(_item, considered), *(_excluded_item(m, reason) for m, reason in excluded)]
    return _pack_of(request, budget, used, text, items, events)


def _item(e: _AnyEntry) -> dict[str, object]:
    components: dict[str, float] | None = None
    b = e.breakdown
    if b is not None:
        components = {
            "relevance": b.relevance,
            "importance": b.importance,
            "recency": b.recency,
            "frequency": b.frequency,
            "composite": b.composite,
        }
    return {
        "id": e.id,
        "ref": e.ref,
        "section": e.kind,
        "tier": e.tier,
        "score": None if e.score is None else float(e.score),
        "components": components,
        "tokens": e.tokens,
        "included": e.included,
        "drop_reason": e.drop_reason,
    }


def _excluded_item(m: MemoryRecord, reason: DropReason) -> dict[str, object]:
    return {
        "id": m.id,
        "ref": m.ref,
        "section": "memory",
        "tier": m.tier,
        "score": None,
        "components": None,
        "tokens": None,
        "included": False,
        "drop_reason": reason,
    }


def _pack_of(
    request: AssemblyInput,
    budget: int,
    used: int,
    text: str,
    items: list[dict[str, object]],
    events: list[PackEvent],
) -> PackData:
    """The pack of `items`. Its id is a uuid5 of what identifies the call and of the
    text, so the same call gives the same id and a different result a different one."""
    dropped = 0
    reasons: Counter[str] = Counter()
    for item in items:
        if not item["included"]:
            dropped += 1
            reason = item["drop_reason"]
            if reason is not None:
                reasons[str(reason)] += 1
    key = json.dumps(
        [
            request.user_id,
            request.query,
            request.now.isoformat(),
            request.strategy,
            request.style,
            budget,
            hashlib.sha256(text.encode()).hexdigest(),
        ]
    )
    return {
        "pack_id": f"pack_{uuid.uuid5(_PACK_NAMESPACE, key).hex}",
        "user_id": request.user_id,
        "query": request.query,
        "assembled_at": request.now,
        "strategy": request.strategy,
        "budget_tokens": budget,
        "used_tokens": used,
        "items": items,
        "dropped_count": dropped,
        "drop_reasons": dict(sorted(reasons.items())),
        "events": [{"type": event.type, "id": event.id} for event in events],
        "retrieval_mode": request.retrieval_mode,
        "style": request.style,
    }
