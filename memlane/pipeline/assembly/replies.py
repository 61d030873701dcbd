"""Assembly rule 4's replies to questions (pipeline.assembly.assembler): which memories
the walk takes, after every item at or above the relevance floor, as the replies of the
lines it took that ask."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeGuard

from memlane.pipeline.assembly import filters
from memlane.pipeline.assembly.parts import AnyEntry, Entry, memory_entry
from memlane.pipeline.assembly.records import AssemblyInput, DropReason
from memlane.pipeline.ranking.scoring import rank
from memlane.pipeline.records import MemoryRecord


def walk_replies(
    request: AssemblyInput,
    above: Sequence[AnyEntry],
    below: Sequence[AnyEntry],
    usable: Sequence[MemoryRecord],
    excluded: Sequence[tuple[MemoryRecord, DropReason]],
) -> list[Entry[MemoryRecord]]:
    """Rule 4's replies: of the memories taken at or above the floor (`above`, walked)
    that ask, in the order they were taken, the memory said next in each one's
    conversation (`request.replies`), once each, when it is a candidate the filters
    pass and was not walked already: an entry of the pool below the floor (`below`),
    moved up, or one read for it alone, scored as the pool's memories are."""
    if not request.replies:
        return []
    walked = {e.id for e in above}
    waiting = {e.id: e for e in below if _of_memory(e)}
    # pinned, verified or filtered out: never a reply
    elsewhere = {m.id for m in usable} | {m.id for m, _ in excluded}
    chosen: list[tuple[str, MemoryRecord]] = []  # (the asker, its reply), in taken order
    for line in above:
        asks = isinstance(line.record, MemoryRecord) and "?" in line.record.content
        reply = request.replies.get(line.id) if asks and line.included else None
        if reply is None or reply.id in walked:
            continue
        if reply.id not in waiting:
            if reply.id in elsewhere or reply.tier != "candidate":
                continue
            ok, _ = filters.split([reply], request, seen=set())
            if not ok:
                continue
        walked.add(reply.id)
        chosen.append((line.id, reply))
    # the replies read for the walk alone, scored at once as the pool's memories are
    fresh = [reply for _, reply in chosen if reply.id not in waiting]
    ranked = rank(
        fresh,
        strategy=request.strategy,
        now=request.now,
        relevance=request.relevance,
        weights=request.weights,
        half_life_hours=request.half_life_hours,
        ordered=False,
    )
    entries = {r.memory.id: memory_entry(r, request.encoding, request.style) for r in ranked}
    out: list[Entry[MemoryRecord]] = []
    for asker, reply in chosen:
        entry = waiting[reply.id] if reply.id in waiting else entries[reply.id]
        entry.reply_to = asker
        out.append(entry)
    return out


def _of_memory(entry: AnyEntry) -> TypeGuard[Entry[MemoryRecord]]:
    return isinstance(entry.record, MemoryRecord)
