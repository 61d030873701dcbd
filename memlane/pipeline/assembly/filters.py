"""What the assembler may use, and in which order: the safety filter and the item orders.

The store's read is never trusted: every item is checked again against the asking user,
and memories against their status, expiry and sensitivity.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from memlane.pipeline.assembly.records import AssemblyInput, DropReason
from memlane.pipeline.dedup.keywords import keywords
from memlane.pipeline.ranking.scoring import RankedMemory
from memlane.pipeline.records import SOUL_KINDS, EpisodeRecord, MemoryRecord, Procedure, SoulBlock
from memlane.pipeline.scope import sees

_WORD = re.compile(r"\w+")
MIN_MATCH_WORD = 3


def memory_exclusion(memory: MemoryRecord, request: AssemblyInput) -> DropReason | None:
    """Why one of the user's memories may not be used, or None if it may.

    Not active (superseded, quarantined, deleted) first, then expired (expires_at <= now),
    then sensitive (unless the request includes sensitive memories).
    """
    if memory.status == "superseded":
        return "superseded"
    if memory.status == "quarantined":
        return "quarantined"
    if memory.status == "deleted":
        return "deleted"
    if memory.expires_at is not None and memory.expires_at <= request.now:
        return "expired"
    if memory.sensitive and not request.include_sensitive:
        return "sensitive"
    return None


def split_memories(
    request: AssemblyInput,
) -> tuple[list[MemoryRecord], list[tuple[MemoryRecord, DropReason]]]:
    """The user's memories: usable ones, and excluded ones with the reason (by id).

    Other users' memories, and other agents' (pipeline.scope), are in neither list: they
    must not even appear in the pack.
    An id read twice (the store's read is a union of several queries) counts once.
    """
    usable, excluded = split(request.memories, request, seen=set())
    excluded.sort(key=lambda pair: pair[0].id)
    return usable, excluded


def split(
    memories: Iterable[MemoryRecord], request: AssemblyInput, *, seen: set[str]
) -> tuple[list[MemoryRecord], list[tuple[MemoryRecord, DropReason]]]:
    """`split_memories` of these memories, in their order, skipping (and adding to)
    the ids in `seen`."""
    usable: list[MemoryRecord] = []
    excluded: list[tuple[MemoryRecord, DropReason]] = []
    for memory in memories:
        if (
            memory.user_id != request.user_id
            or memory.id in seen
            or not sees(request.agent_id, memory.agent_id)
        ):
            continue
        seen.add(memory.id)
        reason = memory_exclusion(memory, request)
        if reason is None:
            usable.append(memory)
        else:
            excluded.append((memory, reason))
    return usable, excluded


def newest_first(ranked: Iterable[RankedMemory]) -> list[RankedMemory]:
    """created_at descending, ties by id ascending."""
    by_id = sorted(ranked, key=lambda r: r.memory.id)
    return sorted(by_id, key=lambda r: r.memory.created_at, reverse=True)


def soul_blocks(request: AssemblyInput) -> list[SoulBlock]:
    """The user's soul blocks: identity, style, anti_patterns (then by content)."""
    mine = [b for b in request.soul_blocks if b.user_id == request.user_id]
    return sorted(mine, key=lambda b: (SOUL_KINDS.index(b.kind), b.content))


def episodes(request: AssemblyInput) -> list[EpisodeRecord]:
    """The user's episodes the agent sees, created_at descending, ties by id ascending."""
    mine = sorted(
        (
            e
            for e in request.episodes
            if e.user_id == request.user_id and sees(request.agent_id, e.agent_id)
        ),
        key=lambda e: e.id,
    )
    return sorted(mine, key=lambda e: e.created_at, reverse=True)


def query_words(query: str | None) -> frozenset[str]:
    """Lower-cased word tokens of the query, of at least MIN_MATCH_WORD characters."""
    words = _WORD.findall((query or "").lower())
    return frozenset(w for w in words if len(w) >= MIN_MATCH_WORD)


def procedures_for_query(procedures: Iterable[Procedure], query: str | None) -> frozenset[str]:
    """The ids of the procedures sharing a keyword (stemmed, `pipeline.dedup.keywords`) with the
    query: the `procedure_ids` of an assembly from the store read, where the stored
    keywords are at hand. No query, no procedures."""
    words = keywords(query) if query else frozenset()
    return frozenset(p.id for p in procedures if p.keywords & words)


def matching_procedures(request: AssemblyInput) -> list[Procedure]:
    """The user's procedures that match the query.

    With `procedure_ids` given: those, by id. Otherwise a procedure matches when it
    shares a query word (see `query_words`) with its keywords or the words of its name;
    most shared words first, then by id. No query, no procedures.
    """
    mine = [p for p in request.procedures if p.user_id == request.user_id]
    if request.procedure_ids is not None:
        return sorted((p for p in mine if p.id in request.procedure_ids), key=lambda p: p.id)
    words = query_words(request.query)
    shared: list[tuple[int, str, Procedure]] = []
    for procedure in mine:
        terms = {k.lower() for k in procedure.keywords} | set(_WORD.findall(procedure.name.lower()))
        count = len(words & terms)
        if count:
            shared.append((-count, procedure.id, procedure))
    shared.sort(key=lambda entry: entry[:2])
    return [procedure for _, _, procedure in shared]
