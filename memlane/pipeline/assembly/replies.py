"""Assembly rule 4's replies to questions (pipeline.assembly.assembler): which memories
the walk takes, after every item at or above the relevance floor, as the replies of the
lines it took that ask (`walk_replies`); and, for a walk of a user's view
(pipeline.assembly.exact_walk), the replies it may take, read once per view
(`from_view`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TypeGuard

import numpy as np
import numpy.typing as npt

from memlane.pipeline.assembly import filters
from memlane.pipeline.assembly.parts import AnyEntry, Entry, memory_entry, rank_for
from memlane.pipeline.assembly.records import AssemblyInput, DropReason
from memlane.pipeline.assembly.shortlists import Shortlist
from memlane.pipeline.ranking.user_view import MEMORY, FloatArray, UserView, epoch
from memlane.pipeline.records import MemoryRecord

# Memories' ids → their replies' ids (None: none), unfiltered: the store's said_next.
SaidNext = Callable[[Sequence[str]], Mapping[str, str | None]]


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
    ranked = rank_for(request, fresh, request.relevance, ordered=False)
    entries = {r.memory.id: memory_entry(r, request.encoding, request.style) for r in ranked}
    out: list[Entry[MemoryRecord]] = []
    for asker, reply in chosen:
        entry = waiting[reply.id] if reply.id in waiting else entries[reply.id]
        entry.reply_to = asker
        out.append(entry)
    return out


def _of_memory(entry: AnyEntry) -> TypeGuard[Entry[MemoryRecord]]:
    return isinstance(entry.record, MemoryRecord)


def askers(
    memories: Sequence[MemoryRecord], relevance: Mapping[str, float], relevance_floor: float
) -> list[str]:
    """The memories whose replies rule 4 may walk, by id: the candidates that ask and
    stand at or above the relevance floor (of the best candidate's relevance, at most
    the pool's best: a few more askers than the walk's, never fewer). `from_view` finds
    the same on a view's rows."""
    free = [m for m in memories if m.tier == "candidate"]
    level = {m.id: min(1.0, max(0.0, relevance.get(m.id, 0.0))) for m in free}
    floor = relevance_floor * max(level.values(), default=0.0)
    return sorted(m.id for m in free if "?" in m.content and level[m.id] >= floor)


def from_view(
    view: UserView,
    request: AssemblyInput,
    shortlist: Shortlist,
    relevance: FloatArray,
    allowed: npt.NDArray[np.bool_] | None,
    said_next: SaidNext,
) -> AssemblyInput:
    """`request` with the replies of the shortlist's memories that ask and stand at or
    above the relevance floor (of the best usable candidate's relevance, at most the
    pool's best: a few more than the walk's askers, never fewer), as the view holds them
    (live, passing the metadata filter: a reply filtered out is none), and their
    relevance, for a reply the shortlist does not hold."""
    rows = np.fromiter(shortlist.kept, dtype=np.intp, count=len(shortlist.kept))
    # the usable candidates: live (a shortlist's rows are), candidate memories, neither
    # expired nor left out as sensitive (filters.memory_exclusion)
    usable = rows[
        view.free[rows]
        & (view.kind[rows] == MEMORY)
        & (view.expires[rows] > epoch(request.now))
        & (request.include_sensitive | ~view.sensitive[rows])
    ]
    asks = asking(view, usable)
    if not asks.any():  # no memory that asks: nothing to read
        return replace(request, replies={}, relevance={})
    level = np.minimum(np.fmax(relevance[usable], 0.0), 1.0)
    floor = request.relevance_floor * float(level.max(initial=0.0))
    ids = view.corpus.ids
    askers = [ids[row] for row in usable[asks & (level >= floor)].tolist()]
    known = view.replies
    unknown = [a for a in askers if a not in known]
    if unknown:  # threads racing here store equal values
        found = said_next(unknown)
        known.update({a: found.get(a) for a in unknown})
    live = view.corpus.live
    replies: dict[str, MemoryRecord] = {}
    scores: dict[str, float] = {}
    for asker in askers:
        reply = known.get(asker)
        row = view.corpus.position(reply) if reply is not None else None
        if row is None or not live[row] or view.kind[row] != MEMORY:
            continue
        if allowed is not None and not allowed[row]:
            continue
        record = view.records[row]
        assert isinstance(record, MemoryRecord)
        replies[asker] = record
        scores[record.id] = float(relevance[row])
    return replace(request, replies=replies, relevance=scores)


def asking(view: UserView, rows: npt.NDArray[np.intp]) -> npt.NDArray[np.bool_]:
    """Which memories of `rows` ask (assembly rule 4's replies), read from what its
    line shows and kept in the view (1: asks, 0: not, NaN: not read yet): a shortlist
    and the rows at the floor past it hold hundreds, the same from one question to the
    next."""
    asks = view.derived.get("asks")
    if asks is None:  # threads racing here store equal values
        asks = view.derived.setdefault("asks", np.full(len(view.corpus), np.nan))
    unread = rows[np.isnan(asks[rows])]
    for row in unread.tolist():
        if view.kind[row] != MEMORY:
            asks[row] = 0.0
            continue
        of = view.records.line_fields(row)
        content = of[-1] if isinstance(of, tuple) else getattr(of, "content", "")
        asks[row] = 1.0 if "?" in content else 0.0
    found: npt.NDArray[np.bool_] = asks[rows] == 1.0
    return found
