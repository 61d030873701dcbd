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
   relevance r (pipeline.ranking.relevance; 0 when none was given) and its composite score
   (pipeline.ranking.scoring; an episode or procedure scores as a memory of importance 0.5 and
   frequency 0, dated by its own date). The pool is walked in this order: first the
   items about as relevant as the best one (r ≥ relevance_floor × the pool's best r,
   default 0.8), by composite, so importance, recency and confirmations decide among
   them; then the rest by relevance (composite, then section, then id break ties). Each
   item goes in when it fits what is left of the whole budget and is skipped whole
   otherwise. So what one section leaves unused the others take, an item that fits is
   never left out while budget stays unused, and an item below the floor never
   displaces one above it: a memory said yesterday, important and often confirmed,
   cannot push out the one the question is about.
   Nothing is said twice: an episode whose keywords the memories taken before it
   already hold (coverage.SAID_AGAIN_SHARE, 60% of them: the dedup rule's share for one memory)
   is left out, fitting or not (drop reason "redundant"): episodes summarise the
   messages the memories come from, and quote them. The walk decides in its order, so
   an episode walked before the memories that repeat it stays.
   Replies to questions: once every item at or above the floor has been walked, the
   replies (`AssemblyInput.replies`: the memory said next in the same conversation) of
   the memories taken so far that ask (their text holds "?") are walked, in the order
   those were taken, each once, when it is a candidate the filters pass that was not
   walked already; then the items below the floor, as above. What is said after a
   question is its answer though it shares none of its words; walked after every item
   above the floor, it never displaces one. Its pack item names the asker (`reply_to`).
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

The rules above are applied here in their order, one function each, so the whole walk
reads top to bottom; the filters, the format, the pack's types and the walk's parts
(entries, account, pack) are in assembly_filters, context_format, assembly_types and
assembly_parts. A rule-4 walk's result carries what pipeline.assembly.walk_on needs to go on
with more items (the working set's second walk).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import tiktoken

from memlane.pipeline.assembly import context_format as fmt
from memlane.pipeline.assembly import filters
from memlane.pipeline.assembly.budget import validate_budget
from memlane.pipeline.assembly.parts import (
    Account,
    AnyEntry,
    Entry,
    Walk,
    build_pack,
    count_line,
    memory_entry,
    rank_for,
)
from memlane.pipeline.assembly.records import (
    AssembledContext,
    AssemblyInput,
    DropReason,
    PackEvent,
)
from memlane.pipeline.assembly.replies import walk_replies
from memlane.pipeline.assembly.tokens import ENCODING_SPECS
from memlane.pipeline.errors import BudgetError
from memlane.pipeline.ranking.scoring import (
    ITEM_IMPORTANCE,
    RankedMemory,
    score_item,
)
from memlane.pipeline.records import EpisodeRecord, MemoryRecord, Procedure

# Pre-tokenisers that always end a piece at `>` + newline before `<` (see rule 5).
ADDITIVE_PATTERNS = frozenset(spec.pat_str for spec in ENCODING_SPECS.values())


def _additive(encoding: tiktoken.Encoding) -> bool:
    return getattr(encoding, "_pat_str", None) in ADDITIVE_PATTERNS


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
    # rule 4 orders its pool by its own key, and rules 2 and 3 by date
    ranked = rank_for(request, usable, relevance, ordered=not by_relevance)

    def memory(item: RankedMemory) -> Entry[MemoryRecord]:
        return memory_entry(item, encoding, style)

    pinned = [
        memory(r) for r in filters.newest_first(r for r in ranked if r.memory.tier == "pinned")
    ]
    verified = [
        memory(r) for r in filters.newest_first(r for r in ranked if r.memory.tier == "verified")
    ]
    candidates = [memory(r) for r in ranked if r.memory.tier == "candidate"]
    soul = [
        Entry(b, f"soul:{b.kind}", None, "soul", "soul", line, count_line(encoding, line))
        for b in filters.soul_blocks(request)
        for line in [fmt.soul_line(b)]
    ]
    episodes = [
        Entry(e, e.id, e.ref, "episodes", "episode", line, count_line(encoding, line))
        for e in filters.episodes(request)
        for line in [fmt.episode_line(e, style)]
    ]
    mine = (
        [p for p in request.procedures if p.user_id == request.user_id and relevance.get(p.id)]
        if by_relevance
        else filters.matching_procedures(request)
    )
    procedures = [
        Entry(p, p.id, p.ref, "procedures", "procedure", line, count_line(encoding, line))
        for p in mine
        for line in [fmt.procedure_line(p, style)]
    ]

    events: list[PackEvent] = []
    account = Account(encoding, request.user_id)
    _always_in(account, budget, soul, pinned, verified, events)
    room_at_floor: int | None = None
    replies: list[Entry[MemoryRecord]] = []
    if by_relevance:
        pool, best = _pool(request, relevance, candidates, episodes, procedures)
        floor = request.relevance_floor * best
        # the pool's order puts every item at or above the floor first
        at_floor = next((i for i, e in enumerate(pool) if relevance_of(e) < floor), len(pool))
        for entry in pool[:at_floor]:
            take_if_it_fits(entry, account, budget, events)
        room_at_floor = budget - account.used
        replies = walk_replies(request, pool[:at_floor], pool[at_floor:], usable, excluded)
        if replies:
            known = {id(e) for e in candidates}
            fresh = [e for e in replies if id(e) not in known]
            candidates.extend(fresh)
            usable = [*usable, *(e.record for e in fresh)]
            below = (e for e in pool[at_floor:] if e.reply_to is None)
            pool = [*pool[:at_floor], *replies, *below]
        for entry in pool[at_floor:]:
            take_if_it_fits(entry, account, budget, events)
        room = budget - account.used
        place = {id(entry): i for i, entry in enumerate(pool)}
        candidates.sort(key=lambda e: place[id(e)])
        episodes.sort(key=lambda e: place[id(e)])
        procedures.sort(key=lambda e: place[id(e)])
        removable: list[AnyEntry] = [*reversed(pool), *reversed(verified)]
    else:
        room = _by_share(account, budget, request.memory_share, candidates)
        later: list[AnyEntry] = [*episodes, *procedures]
        for entry in later:
            take_if_it_fits(entry, account, budget, events)
        removable = [
            *reversed(candidates),
            *reversed(procedures),
            *reversed(episodes),
            *reversed(verified),
        ]

    memories = [*pinned, *verified, *candidates]
    text, used = render_within_budget(
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
    considered: list[AnyEntry] = [*soul, *memories, *episodes, *procedures]
    pack = build_pack(request, budget, used, text, considered, excluded, events)
    walk = None
    if by_relevance and _additive(encoding):
        key = pool_key(request.relevance_floor * best)
        walk = Walk(
            request=request,
            budget=budget,
            account=account,
            soul=soul,
            pinned=pinned,
            verified=verified,
            candidates=candidates,
            episodes=episodes,
            procedures=procedures,
            usable=usable,
            excluded=excluded,
            events=walked_events,
            items=pack["items"],
            best=best,
            # a reply walked out of its place may come after the pool's last (the parts
            # above and below the floor keep their order, every key above before below)
            last=max([key(pool[-1]), *map(key, replies)]) if pool else None,
        )
    return AssembledContext(
        text=text,
        selection=selection,
        pack_data=pack,
        included_memory_ids=[m.id for m in selection.memories],
        room=room,
        room_at_floor=room_at_floor,
        walk=walk,
    )


def _always_in(
    account: Account,
    budget: int,
    soul: Sequence[AnyEntry],
    pinned: Sequence[AnyEntry],
    verified: Sequence[AnyEntry],
    events: list[PackEvent],
) -> None:
    """Rules 2 and 3 of the module docstring: soul and pinned, then verified."""
    for entry in [*soul, *pinned]:
        account.take(entry)
    if account.used > budget:
        raise _over_budget(budget, account.used, len(soul), len(pinned))
    for entry in verified:
        take_if_it_fits(entry, account, budget, events)


def _pool(
    request: AssemblyInput,
    relevance: Mapping[str, float],
    candidates: Sequence[Entry[MemoryRecord]],
    episodes: Sequence[Entry[EpisodeRecord]],
    procedures: Sequence[Entry[Procedure]],
) -> tuple[list[AnyEntry], float]:
    """Rule 4's walk order: candidates, episodes and procedures, those at or above the
    relevance floor first, each part by composite score; ties by section, then id. And
    the best relevance of them, which the floor is relative to."""
    others: list[Entry[EpisodeRecord] | Entry[Procedure]] = [*episodes, *procedures]
    score_others(request, relevance, others)
    scored: list[AnyEntry] = [*candidates, *others]
    best = max((relevance_of(e) for e in scored), default=0.0)
    return sorted(scored, key=pool_key(request.relevance_floor * best)), best


def score_others(
    request: AssemblyInput,
    relevance: Mapping[str, float],
    others: Sequence[Entry[EpisodeRecord] | Entry[Procedure]],
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


def pool_key(floor: float) -> Callable[[AnyEntry], tuple[bool, float, float, int, str]]:
    def key(entry: AnyEntry) -> tuple[bool, float, float, int, str]:
        score = entry.breakdown.composite if entry.breakdown is not None else 0.0
        relevance = relevance_of(entry)
        if relevance >= floor:
            return (False, -score, 0.0, _SECTION_PLACE[entry.section], entry.id)
        return (True, -relevance, -score, _SECTION_PLACE[entry.section], entry.id)

    return key


def relevance_of(entry: AnyEntry) -> float:
    return entry.breakdown.relevance if entry.breakdown is not None else 0.0


def _by_share(
    account: Account, budget: int, memory_share: float, candidates: Sequence[AnyEntry]
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


def take_if_it_fits(
    entry: AnyEntry, account: Account, budget: int, events: list[PackEvent]
) -> None:
    if account.says_again(entry):
        _drop(entry, "redundant", events)
    elif account.used + account.cost(entry) <= budget:
        account.take(entry)
    else:
        _drop(entry, "over_budget", events)


def _drop(entry: AnyEntry, reason: DropReason, events: list[PackEvent]) -> None:
    entry.included = False
    entry.drop_reason = reason
    if entry.tier == "verified":
        events.append(PackEvent(type="verified_item_dropped", id=entry.id))


def render_within_budget(
    user_id: str,
    sections: tuple[Sequence[AnyEntry], ...],
    removable: Sequence[AnyEntry],
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
