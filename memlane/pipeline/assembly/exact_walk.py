"""Assembly from a user's working set that includes exactly what walking every ranked item
would (`MEMLANE_WALK_MARGIN=0`), while the assembler walks a few hundred of them.

The view ranks every item; the assembler walks the best, until their estimated lines
fill `walk_margin` budgets (shortlists.make, with the rows walk_rows adds near the
cut). What the walk leaves (`AssembledContext.room`: of the whole budget after rule 4,
of the memories' share after rule 5) only shrinks as it goes on, and an item is taken
only if it costs no more than what is left. So of the ranked items not walked, only
those whose line's least cost (pipeline.assembly.line_bound) is within that room could have gone
in: when there are any, the assembler walks again with them (its walk orders what it is
given, so they fall in place). Every other item would have been skipped by a walk of
all of them, and skipped items change nothing but the pack's list of what was considered.

Why the room is read right: the first walk walks a set closed under "ranked before" (the
shortlist's best, and whatever the assembler may rank before the last of them), plus
rows added out of order (`Shortlist.added`, walked though a row not walked may come
before them). What those took is added back to the room, with a section's wrapper each.

Replies (assembly rule 4: after every item at or above the relevance floor, the memory
said next after each line taken that asks) come from the view whatever the shortlist
holds, so the walk of every item and the first walk walk the same ones when they took
the same lines at the floor. The rows at or above the floor the shortlist left come
after those it holds, where the room is at most what the first walk left at the floor
(`AssembledContext.room_at_floor`, before the replies): those whose least cost is
within it are walked in a second first walk, and the others would have been skipped. The
replies walked are then no longer rows to go on with.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import lru_cache
from typing import TypeVar

import numpy as np
import numpy.typing as npt
import tiktoken

from memlane.pipeline.assembly import context_format as fmt
from memlane.pipeline.assembly import line_bound, replies, shortlists, walk_rows
from memlane.pipeline.assembly.assembler import assemble_context, pool_key
from memlane.pipeline.assembly.parts import Entry, Walk, count_line
from memlane.pipeline.assembly.records import AssembledContext, AssemblyInput, ItemSection
from memlane.pipeline.assembly.shortlists import Shortlist
from memlane.pipeline.assembly.walk_on import walk_on
from memlane.pipeline.ranking.memory_table import Record
from memlane.pipeline.ranking.scoring import (
    ITEM_IMPORTANCE,
    ScoreBreakdown,
    balanced_score,
    score_item,
    score_memories,
)
from memlane.pipeline.ranking.user_view import (
    EPISODE,
    MEMORY,
    PROCEDURE,
    FloatArray,
    UserView,
)
from memlane.pipeline.records import EpisodeRecord, MemoryRecord, Procedure

_KINDS = {MEMORY: "memory", EPISODE: "episode", PROCEDURE: "procedure"}


@lru_cache(maxsize=16)
def _wrapper(encoding: tiktoken.Encoding) -> int:
    """The most tokens a section's wrapper costs (the first item of a section pays it)."""
    return max(
        len(encoding.encode_ordinary(fmt.section_open(name)))
        + len(encoding.encode_ordinary(fmt.section_close(name)))
        for name in fmt.SECTION_ORDER
    )


def assemble_from_view(
    view: UserView,
    request: AssemblyInput,
    relevance: FloatArray | None,
    *,
    walk_margin: float,
    allowed: npt.NDArray[np.bool_] | None = None,
    said_next: replies.SaidNext | None = None,
) -> AssembledContext:
    """The assembly of `request` from `view`, `relevance` its rows' relevance to the query
    (None without one): the context and decisions of a walk of every item (module
    docstring). `walk_margin` > 0 only sets how far the first walk goes; `allowed`: the
    rows a metadata filter passes (shortlists.make); `said_next`: memories' replies' ids
    (assembly rule 4), read from the store once per view."""
    budget = request.budget_tokens
    shortlist = shortlists.make(
        view,
        relevance,
        strategy=request.strategy,
        now=request.now,
        weights=request.weights,
        half_life_hours=request.half_life_hours,
        relevance_floor=request.relevance_floor,
        include_sensitive=request.include_sensitive,
        limit=shortlists.size(view, budget, request.style, walk_margin),
        walk_tokens=walk_margin * budget if walk_margin > 0 else None,
        style=request.style,
        allowed=allowed,
    )
    # rule 4's walk, the only one with replies
    replying = (
        said_next is not None
        and relevance is not None
        and bool(request.query)
        and request.strategy == "scored"
    )
    if replying:
        assert said_next is not None and relevance is not None
        request = replies.from_view(view, request, shortlist, relevance, allowed, said_next)
    first = assemble_context(_with(request, view, shortlist))
    rest = shortlist.rest
    if not len(rest):
        return first
    encoding, style = request.encoding, request.style
    if replying and first.room_at_floor is not None:
        assert relevance is not None and said_next is not None
        if not isinstance(first.walk, Walk):
            # no walk to reason about (an encoding counted whole): every row is walked
            shortlist = shortlists.widen(view, shortlist, rest)
            request = replies.from_view(view, request, shortlist, relevance, allowed, said_next)
            return assemble_context(_with(request, view, shortlist))
        # rows at or above the floor not walked come after those walked, where the room
        # is at most what the first walk left at the floor: those it may hold are walked
        # before the replies (module docstring)
        floor = request.relevance_floor * first.walk.best
        at_floor = rest[np.minimum(np.fmax(relevance[rest], 0.0), 1.0) >= floor]
        room_at = first.room_at_floor + _out_of_order(first, shortlist, encoding)
        more = at_floor[_least_tokens(view, encoding, style)[at_floor] <= room_at]
        replied = bool(request.replies) and any(i["reply_to"] for i in first.pack_data["items"])
        if not replied and not replies.asking(view, more).any():
            # no reply walked, none to walk: the walk is rule 4's plain one, and the
            # rows past the shortlist are gone on with as they always were
            more = more[:0]
        if len(more):
            shortlist = replace(shortlists.widen(view, shortlist, more), rest=rest)
            request = replies.from_view(view, request, shortlist, relevance, allowed, said_next)
            first = assemble_context(_with(request, view, shortlist))
        # the replies walked are walked
        ids = (
            [str(i["id"]) for i in first.pack_data["items"] if i["reply_to"]]
            if request.replies
            else []
        )
        gone = [at for i in ids if (at := view.corpus.position(i)) is not None]
        walked = np.array([*gone, *more.tolist()], dtype=np.intp)
        if len(walked):  # a few rows of thousands: a mask, not a sort (np.isin)
            waiting = np.ones(len(view.corpus), dtype=np.bool_)
            waiting[walked] = False
            rest = rest[waiting[rest]]
            shortlist = replace(shortlist, rest=rest)
        if not len(rest):
            return first
    room = first.room + _out_of_order(first, shortlist, encoding)
    if not line_bound.known(encoding):
        # no bound for an encoding of unknown pattern: every item not walked is walked now
        return assemble_context(_with(request, view, shortlists.widen(view, shortlist, rest)))
    least = _least_tokens(view, encoding, style)[rest]
    maybe = rest[least <= room]
    if not len(maybe):
        return first
    if not shortlist.added and shortlist.ranking is not None:
        # the room is exact: of `maybe`, the walk takes those it takes in their order
        rows, left = _taken(view, maybe, least[least <= room], shortlist, room, first, request)
        if not len(rows):
            return first
        # the rows taken come after every row walked: the walk goes on with them alone
        added = shortlists.extension(view, shortlist, rows)
        result = walk_on(
            first,
            memories=added.memories,
            episodes=added.episodes,
            procedures=added.procedures,
            relevance=added.relevance,
        ) or assemble_context(_with(request, view, shortlists.widen(view, shortlist, rows)))
        if result.room == left:  # as foreseen (otherwise: all that may fit, below)
            return result
    more = maybe[_line_tokens(view, maybe, encoding, style) <= room]
    if not len(more):
        return first
    return assemble_context(_with(request, view, shortlists.widen(view, shortlist, more)))


def _out_of_order(
    first: AssembledContext, shortlist: Shortlist, encoding: tiktoken.Encoding
) -> int:
    """What the rows walked out of order (`Shortlist.added`) took, a wrapper each."""
    if not shortlist.added:
        return 0
    wrapper = _wrapper(encoding)
    return sum(
        int(item["tokens"]) + wrapper
        for item in first.pack_data["items"]
        if item["included"] and item["id"] in shortlist.added
    )


def _least_tokens(view: UserView, encoding: tiktoken.Encoding, style: fmt.Style) -> FloatArray:
    """Each row's line's least tokens (pipeline.assembly.line_bound: its text's runs, its kind's
    least markup and what its ref and date add to that), the same for every query to a
    view: computed once per encoding and style (over a 100k user's rows not walked, per
    query, it cost ~0.7 ms). With the ref and date, the walks on of 45 new questions to a
    10k user counted 1,306 lines instead of 2,057 (bench/README.md)."""
    key = ("least tokens", encoding, style)
    least = view.derived.get(key)
    if least is None:  # threads racing here store equal arrays
        floors = [line_bound.floor(encoding, style, _KINDS[kind]) for kind in sorted(_KINDS)]
        dated = [kind for kind in _KINDS if line_bound.dated(style, _KINDS[kind])]
        dates = np.where(np.isin(view.kind, dated), view.created, np.nan)
        least = (
            view.runs
            + np.array([*floors, 0.0])[view.kind]  # a dead row's kind is -1
            + line_bound.markup_extra(encoding, view.ref, dates)
        )
        view.derived[key] = least
    return least


_SECTIONS = {MEMORY: "memories", EPISODE: "episodes", PROCEDURE: "procedures"}


def _taken(
    view: UserView,
    rows: npt.NDArray[np.intp],
    least: FloatArray,
    shortlist: Shortlist,
    room: int,
    first: AssembledContext,
    request: AssemblyInput,
) -> tuple[npt.NDArray[np.intp], int]:
    """Of `rows` (`least`: their lines' least tokens), those a walk on from the end of
    `first`'s takes, and the room it leaves: each that costs no more than what is left.
    A line is counted only when its bound fits what is left."""
    encoding, style = request.encoding, request.style
    counts = _counts(view, encoding, style)
    # a row whose line is counted costs that: most rows the bound lets through, once
    # their lines have been counted, cost more than the room (which only shrinks)
    known = counts[rows]
    least = np.where(np.isnan(known), least, known)
    open_ = least <= room
    rows, least = rows[open_], least[open_]
    if not len(rows):
        return rows, room
    assert shortlist.ranking is not None
    keys = _exact_keys(view, shortlist, first, request)
    kinds = {"memory": MEMORY, "episode": EPISODE, "procedure": PROCEDURE}
    used = {kinds.get(i["section"]) for i in first.pack_data["items"] if i["included"]}
    seen = np.zeros(len(rows), dtype=np.bool_)
    taken: list[int] = []
    # the walk on usually stops within a few rows: they are ordered a chunk at a time
    for chunk in walk_rows.in_order(view, rows, shortlist.ranking, keys):
        for at in chunk.tolist():
            if least[at] > room:
                continue
            row = int(rows[at])
            line = float(counts[row])
            if line != line:  # not counted yet (NaN)
                line = counts[row] = count_line(encoding, _counted_line(view, row, style))
            kind = int(view.kind[row])
            cost = int(line) + (0 if kind in used else _section_tokens(encoding, _SECTIONS[kind]))
            if cost <= room:
                room -= cost
                used.add(kind)
                taken.append(row)
        seen[chunk] = True
        if not (least[~seen] <= room).any():  # no row left could fit
            break
    return np.array(taken, dtype=np.intp), room


def _exact_keys(
    view: UserView, shortlist: Shortlist, first: AssembledContext, request: AssemblyInput
) -> Callable[[list[int]], list[tuple[object, ...]]]:
    """The assembler's sort key of rows (rule 4's `assembly.pool_key`, scoring.rank's
    order), from the rows' records scored by its own functions: for the few rows the
    view's keys cannot order."""
    now, weights, half_life = request.now, request.weights, request.half_life_hours
    # the rows' relevance as the shortlist hands it over (`request` has none)
    scores = shortlist.scores
    by_relevance = bool(request.query) and request.strategy == "scored" and scores is not None
    walk = first.walk
    pool_order = pool_key(request.relevance_floor * (walk.best if isinstance(walk, Walk) else 0.0))

    def key(row: int) -> tuple[object, ...]:
        record = view.records[row]
        relevance = {record.id: float(scores[row])} if scores is not None else {}
        if isinstance(record, MemoryRecord):
            scored = score_memories(
                [record], relevance=relevance, now=now, weights=weights, half_life_hours=half_life
            )[0]
            if by_relevance:
                return pool_order(_entry(record, "memories", "memory", scored))
        else:
            scored = score_item(
                relevance=relevance.get(record.id, 0.0),
                importance=ITEM_IMPORTANCE,
                stated_at=record.created_at,
                confirmations=0,
                now=now,
                weights=weights,
                half_life_hours=half_life,
            )
            assert by_relevance  # only memories are ranked without (rule 5)
            if isinstance(record, EpisodeRecord):
                return pool_order(_entry(record, "episodes", "episode", scored))
            return pool_order(_entry(record, "procedures", "procedure", scored))
        if request.strategy == "important":
            return (-record.importance, record.id)
        if request.strategy == "balanced":
            return (
                -balanced_score(record.importance, record.created_at, now=request.now),
                record.id,
            )
        return (-scored.composite, record.id)

    return lambda rows: [key(row) for row in rows]


_Item = TypeVar("_Item", MemoryRecord, EpisodeRecord, Procedure)


def _entry(
    record: _Item, section: fmt.SectionName, kind: ItemSection, scored: ScoreBreakdown
) -> Entry[_Item]:
    """What rule 4's key reads of an item: its section, id and scores."""
    return Entry(record, record.id, None, section, kind, "", 0, scored.composite, scored)


@lru_cache(maxsize=64)
def _section_tokens(encoding: tiktoken.Encoding, name: fmt.SectionName) -> int:
    return len(encoding.encode_ordinary(fmt.section_open(name))) + len(
        encoding.encode_ordinary(fmt.section_close(name))
    )


def _line_tokens(
    view: UserView, rows: npt.NDArray[np.intp], encoding: tiktoken.Encoding, style: fmt.Style
) -> FloatArray:
    """The tokens of the `rows`' lines, counted once per row and kept in the view: a row
    the bound lets through is likely to be let through again."""
    counts = _counts(view, encoding, style)
    for row in rows[np.isnan(counts[rows])].tolist():
        counts[row] = count_line(encoding, _counted_line(view, row, style))
    return counts[rows]


def count_lines(view: UserView, encoding: tiktoken.Encoding, style: fmt.Style) -> int:
    """Count the tokens of every line of the view not counted yet in `encoding` and
    `style`, and keep them where the walk on reads them; how many were counted.
    `Memlane.warm` counts ahead: a new question's walks otherwise count the lines they
    meet first, up to a few hundred, the tail of a warm user's assemblies
    (bench/README.md). Through `count_line`'s cache, which the first walk's lines read:
    counted into the view alone, the walk on was spared but not the first walk."""
    uncounted = int(np.isnan(_counts(view, encoding, style)).sum())
    _line_tokens(view, np.arange(len(view.corpus), dtype=np.intp), encoding, style)
    return uncounted


def _counts(view: UserView, encoding: tiktoken.Encoding, style: fmt.Style) -> FloatArray:
    """The view's line tokens per row in `encoding` and `style` (NaN: not counted yet)."""
    counts = view.line_tokens.get((encoding, style))
    if counts is None:
        counts = view.line_tokens.setdefault((encoding, style), np.full(len(view.corpus), np.nan))
    return counts


def _counted_line(view: UserView, row: int, style: fmt.Style) -> str:
    """Row's line, as `_line` renders its record, without building a memory's record
    (LazyRecords.line_fields): of the hundreds of lines a new question's walk on may
    count, it takes a few."""
    of = view.records.line_fields(row)
    if isinstance(of, tuple):
        return fmt.memory_line_of(*of, style)
    return _line(of, style)


def _line(record: Record, style: fmt.Style) -> str:
    if isinstance(record, MemoryRecord):
        return fmt.memory_line(record, style)
    if isinstance(record, EpisodeRecord):
        return fmt.episode_line(record, style)
    return fmt.procedure_line(record, style)


def _with(request: AssemblyInput, view: UserView, shortlist: Shortlist) -> AssemblyInput:
    return replace(
        request,
        memories=shortlist.memories,
        # a reply's relevance (`replies.from_view`), and the shortlist's rows'
        relevance=(
            {**request.relevance, **shortlist.relevance}
            if request.relevance
            else shortlist.relevance
        ),
        soul_blocks=view.soul_blocks,
        episodes=shortlist.episodes,
        procedures=shortlist.procedures,
    )
