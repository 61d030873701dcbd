"""The context assembler: items read from the store → one budgeted XML block and its pack.

Pure: the store read, the clock (`now`), the encoding and the relevance scores come in.

Rules, in the order they are applied:
1. Safety (assembly_filters): only the asking user's items; memories active, not expired,
   not sensitive unless asked for.
2. Always in: the soul blocks and the pinned memories. If they alone (with the XML around
   them) exceed the budget: BudgetError, saying by how much.
3. Memories, in this order: pinned (created_at desc, then id), verified (created_at desc,
   then id), candidates (the strategy's rank: score desc, then id).
   - verified go in while the whole budget holds them: they may use more than the
     memories' share, since dropping one is a last resort; each one left out is the
     event `verified_item_dropped`;
   - candidates go in, best first, while the memories section (wrapper and all items)
     stays within floor(memory_share × (budget − root − soul section)); a candidate that
     does not fit is skipped whole and the next one is tried. Candidates of which none
     went in are the event `no_candidates_fit`.
4. Episodes (newest first), then procedures matching the query, each skipped whole if it
   does not fit what is left of the whole budget: what the memories did not use flows on.
5. Accounting: each rendered line is counted once (cached by line) and lines, section
   wrappers and the root add up to the document's count, since every line ends in `>` +
   newline (see context_format). For the encodings whose pre-tokeniser is known to
   split there (`ADDITIVE_PATTERNS`: tiktoken's cl100k_base, o200k_base and p50k_base;
   test_context_format checks it for any content), that sum is the exact count of the
   finished string. Any other encoding's finished string is counted whole; should it
   be over the budget, the lowest-ranked candidates, then procedures, then episodes
   (oldest first), then verified memories (oldest first, with events) are removed until
   it fits (drop reason "recount"). So used_tokens == count(text) <= budget, always.

The pack comes back as plain data (`AssembledContext.pack_data`); the ContextPack model
is built from it only when asked for.
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Generic, TypeVar

import tiktoken

from memlane.models.schemas import EpisodeRecord, MemoryRecord, Procedure, SoulBlock, Tier
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
from memlane.pipeline.scoring import RankedMemory, rank
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
    """One considered item: its record, rendered line, cost and the decision about it."""

    record: _R
    id: str
    section: fmt.SectionName
    kind: ItemSection
    line: str
    tokens: int
    ranked: RankedMemory | None = None
    included: bool = False
    drop_reason: DropReason | None = None

    @property
    def tier(self) -> Tier | None:
        return self.record.tier if isinstance(self.record, MemoryRecord) else None


_AnyEntry = _Entry[SoulBlock] | _Entry[MemoryRecord] | _Entry[EpisodeRecord] | _Entry[Procedure]


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
    encoding = request.encoding
    usable, excluded = filters.split_memories(request)
    ranked = rank(
        usable,
        strategy=request.strategy,
        now=request.now,
        relevance=dict(request.relevance),
        weights=request.weights,
        half_life_hours=request.half_life_hours,
    )

    def memory(item: RankedMemory) -> _Entry[MemoryRecord]:
        line = fmt.memory_line(item.memory)
        m = item.memory
        return _Entry(m, m.id, "memories", "memory", line, _tokens(encoding, line), item)

    pinned = [
        memory(r) for r in filters.newest_first(r for r in ranked if r.memory.tier == "pinned")
    ]
    verified = [
        memory(r) for r in filters.newest_first(r for r in ranked if r.memory.tier == "verified")
    ]
    candidates = [memory(r) for r in ranked if r.memory.tier == "candidate"]
    soul = [
        _Entry(b, f"soul:{b.kind}", "soul", "soul", line, _tokens(encoding, line))
        for b in filters.soul_blocks(request)
        for line in [fmt.soul_line(b)]
    ]
    episodes = [
        _Entry(e, e.id, "episodes", "episode", line, _tokens(encoding, line))
        for e in filters.episodes(request)
        for line in [fmt.episode_line(e)]
    ]
    procedures = [
        _Entry(p, p.id, "procedures", "procedure", line, _tokens(encoding, line))
        for p in filters.matching_procedures(request)
        for line in [fmt.procedure_line(p)]
    ]

    events: list[PackEvent] = []
    account = _Account(encoding, request.user_id)
    _select(account, budget, request.memory_share, soul, pinned, verified, candidates, events)
    later: list[_AnyEntry] = [*episodes, *procedures]
    for entry in later:
        _take_if_it_fits(entry, account, budget, events)

    memories = [*pinned, *verified, *candidates]
    removable: list[_AnyEntry] = [
        *reversed(candidates),
        *reversed(procedures),
        *reversed(episodes),
        *reversed(verified),
    ]
    text, used = _render_within_budget(
        request.user_id,
        (soul, memories, episodes, procedures),
        removable,
        budget,
        encoding,
        events,
        exact=account.used if _additive(encoding) else None,
    )
    if candidates and not any(entry.included for entry in candidates):
        events.append(PackEvent(type="no_candidates_fit"))

    selection = fmt.Selection(
        user_id=request.user_id,
        soul=[e.record for e in soul if e.included],
        memories=[e.record for e in memories if e.included],
        episodes=[e.record for e in episodes if e.included],
        procedures=[e.record for e in procedures if e.included],
    )
    considered: list[_AnyEntry] = [*soul, *memories, *episodes, *procedures]
    return AssembledContext(
        text=text,
        json=fmt.as_json(selection),
        pack_data=_pack(request, budget, used, text, considered, excluded, events),
        included_memory_ids=[m.id for m in selection.memories],
    )


def _select(
    account: _Account,
    budget: int,
    memory_share: float,
    soul: Sequence[_AnyEntry],
    pinned: Sequence[_AnyEntry],
    verified: Sequence[_AnyEntry],
    candidates: Sequence[_AnyEntry],
    events: list[PackEvent],
) -> None:
    """Rules 2 and 3 of the module docstring: soul and pinned, verified, candidates."""
    for entry in soul:
        account.take(entry)
    memory_cap = math.floor(memory_share * (budget - account.used))
    for entry in pinned:
        account.take(entry)
    if account.used > budget:
        raise _over_budget(budget, account.used, len(soul), len(pinned))
    for entry in verified:
        _take_if_it_fits(entry, account, budget, events)
    for entry in candidates:
        cost = account.cost(entry)
        if account.section_used.get("memories", 0) + cost > memory_cap:
            entry.drop_reason = (
                "over_budget" if account.used + cost > budget else "over_memory_share"
            )
        else:
            account.take(entry)


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
    (so it equals the model's dump). Its id is a uuid5 of what identifies the call and
    of the text, so the same call gives the same id and a different result a different one."""
    items: list[dict[str, object]] = []
    dropped = 0
    reasons: Counter[str] = Counter()
    for e in considered:
        ranked = e.ranked
        components: dict[str, float] | None = None
        if ranked is not None:
            b = ranked.breakdown
            components = {
                "relevance": b.relevance,
                "importance": b.importance,
                "recency": b.recency,
                "frequency": b.frequency,
                "composite": b.composite,
            }
        if not e.included:
            dropped += 1
            if e.drop_reason is not None:
                reasons[e.drop_reason] += 1
        items.append(
            {
                "id": e.id,
                "section": e.kind,
                "tier": e.tier,
                "score": None if ranked is None else float(ranked.score),
                "components": components,
                "tokens": e.tokens,
                "included": e.included,
                "drop_reason": e.drop_reason,
            }
        )
    for m, reason in excluded:
        dropped += 1
        reasons[reason] += 1
        items.append(
            {
                "id": m.id,
                "section": "memory",
                "tier": m.tier,
                "score": None,
                "components": None,
                "tokens": None,
                "included": False,
                "drop_reason": reason,
            }
        )
    key = json.dumps(
        [
            request.user_id,
            request.query,
            request.now.isoformat(),
            request.strategy,
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
    }
