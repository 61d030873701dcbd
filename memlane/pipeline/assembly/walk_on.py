"""The assembler's rule-4 walk (a query, strategy `scored`) gone on with more items: the
second walk of pipeline.assembly.exact_walk, which adds the few rows past a working set's
shortlist that fit what the first walk left.

When every item added comes after every item the first walk saw in rule 4's order, and
none is more relevant than the best of them (the relevance floor stays where it was),
a walk of all of them takes the first walk's decisions in the first walk's order and
then walks the added ones with what is left: so only those are scored, rendered,
counted and walked, and the first pack's items are kept. Anything else (rule 5, an
encoding counted whole, a pinned or verified memory, an item out of order) gives None,
and the caller assembles anew. tests/unit/test_exact_walk.py checks the result equals
a walk of every item.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memlane.pipeline.assembly import context_format as fmt
from memlane.pipeline.assembly import filters
from memlane.pipeline.assembly.assembler import (
    pool_key,
    relevance_of,
    render_within_budget,
    score_others,
    take_if_it_fits,
)
from memlane.pipeline.assembly.parts import (
    AnyEntry,
    Entry,
    Walk,
    count_line,
    excluded_item,
    memory_entry,
    pack_item,
    pack_of,
    rank_for,
)
from memlane.pipeline.assembly.records import AssembledContext, PackEvent
from memlane.pipeline.records import EpisodeRecord, MemoryRecord, Procedure


def walk_on(
    first: AssembledContext,
    *,
    memories: Sequence[MemoryRecord],
    episodes: Sequence[EpisodeRecord],
    procedures: Sequence[Procedure],
    relevance: Mapping[str, float],
) -> AssembledContext | None:
    """`first` as if its request had held these items too (`relevance`: theirs), or None
    when they cannot simply be walked after it (module docstring)."""
    walk = first.walk
    if not isinstance(walk, Walk):
        return None
    request = walk.request
    user, encoding, style = request.user_id, request.encoding, request.style
    # the first walk's memories are walked already; the rest split as it split its own
    seen = {m.id for m in walk.usable} | {m.id for m, _ in walk.excluded}
    usable, excluded = filters.split(memories, request, seen=seen)
    ranked = rank_for(request, usable, relevance, ordered=False)
    if any(r.memory.tier != "candidate" for r in ranked):
        return None  # rules 2 and 3 would take it before the pool
    added_episodes = [
        Entry(e, e.id, e.ref, "episodes", "episode", line, count_line(encoding, line))
        for e in episodes
        if e.user_id == user
        for line in [fmt.episode_line(e, style)]
    ]
    added_procedures = [
        Entry(p, p.id, p.ref, "procedures", "procedure", line, count_line(encoding, line))
        for p in procedures
        if p.user_id == user and relevance.get(p.id)
        for line in [fmt.procedure_line(p, style)]
    ]
    score_others(request, relevance, [*added_episodes, *added_procedures])
    added_memories = [memory_entry(r, encoding, style) for r in ranked]
    pool: list[AnyEntry] = [*added_memories, *added_episodes, *added_procedures]
    if max((relevance_of(e) for e in pool), default=0.0) > walk.best:
        return None  # the relevance floor would move
    floor = request.relevance_floor * walk.best
    if request.replies and any(relevance_of(e) >= floor for e in pool):
        return None  # it would be walked before the replies
    key = pool_key(floor)
    pool.sort(key=key)
    if pool and walk.last is not None and not key(pool[0]) > walk.last:
        return None  # not after every item walked
    account = walk.account.copy()
    events = list(walk.events)
    for entry in pool:
        take_if_it_fits(entry, account, walk.budget, events)
    # each section in the pool's order (one key orders them all)
    added_memories.sort(key=key)
    added_episodes.sort(key=key)
    added_procedures.sort(key=key)
    candidates = [*walk.candidates, *added_memories]
    memories_in = [*walk.pinned, *walk.verified, *candidates]
    episodes_in = [*walk.episodes, *added_episodes]
    procedures_in = [*walk.procedures, *added_procedures]
    text, used = render_within_budget(
        user,
        (walk.soul, memories_in, episodes_in, procedures_in),
        [],
        walk.budget,
        encoding,
        events,
        exact=account.used,
    )
    if candidates and not any(entry.included for entry in candidates):
        events.append(PackEvent(type="no_candidates_fit"))
    selection = fmt.Selection(
        user_id=user,
        soul=[e.record for e in walk.soul if e.included],
        memories=[e.record for e in memories_in if e.included],
        episodes=[e.record for e in episodes_in if e.included],
        procedures=[e.record for e in procedures_in if e.included],
        style=style,
    )
    # the first walk's items stand; each section's new ones go after its old ones, and
    # the excluded memories stay in id order
    items = walk.items
    memories_end = len(walk.soul) + len(walk.pinned) + len(walk.verified) + len(walk.candidates)
    episodes_end = memories_end + len(walk.episodes)
    procedures_end = episodes_end + len(walk.procedures)
    left_out = [*items[procedures_end:], *(excluded_item(m, r) for m, r in excluded)]
    if excluded:
        left_out.sort(key=lambda item: str(item["id"]))
    pack = pack_of(
        request,
        walk.budget,
        used,
        text,
        [
            *items[:memories_end],
            *map(pack_item, added_memories),
            *items[memories_end:episodes_end],
            *map(pack_item, added_episodes),
            *items[episodes_end:procedures_end],
            *map(pack_item, added_procedures),
            *left_out,
        ],
        events,
    )
    return AssembledContext(
        text=text,
        selection=selection,
        pack_data=pack,
        included_memory_ids=[m.id for m in selection.memories],
        room=walk.budget - account.used,
    )
