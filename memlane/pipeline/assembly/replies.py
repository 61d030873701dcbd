"""Assembly rule 4's replies to questions (pipeline.assembly.assembler): which memories
the walk takes, after every item at or above the relevance floor, as the replies of the
lines it took that ask."""

from __future__ import annotations

from collections.abc import Sequence

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
    waiting = {e.id: e for e in below if isinstance(e.record, MemoryRecord)}
    # pinned, verified or filtered out: never a reply
    elsewhere = {m.id for m in usable} | {m.id for m, _ in excluded}
    out: list[Entry[MemoryRecord]] = []
    for line in above:
        asks = isinstance(line.record, MemoryRecord) and "?" in line.record.content
        reply = request.replies.get(line.id) if asks and line.included else None
        if reply is None or reply.id in walked:
            continue
        entry = waiting.get(reply.id)
        if entry is None:
            if reply.id in elsewhere or reply.tier != "candidate":
                continue
            ok, _ = filters.split([reply], request, seen=set())
            if not ok:
                continue
            (ranked,) = rank(
                ok,
                strategy=request.strategy,
                now=request.now,
                relevance=request.relevance,
                weights=request.weights,
                half_life_hours=request.half_life_hours,
                ordered=False,
            )
            entry = memory_entry(ranked, request.encoding, request.style)
        assert isinstance(entry.record, MemoryRecord)
        entry.reply_to = line.id
        walked.add(reply.id)
        out.append(entry)  # type: ignore[arg-type]  # a memory's entry
    return out
