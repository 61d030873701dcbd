"""Assembly from a user's working set that includes exactly what walking every ranked item
would (`MEMLANE_WALK_MARGIN=0`), while the assembler walks a few hundred of them.

The view ranks every item; the assembler walks the best, until their estimated lines
fill `walk_margin` budgets (UserView.shortlist, with the rows walk_rows adds near the
cut). What the walk leaves (`AssembledContext.room`: of the whole budget after rule 4,
of the memories' share after rule 5) only shrinks as it goes on, and an item is taken
only if it costs no more than what is left. So of the ranked items not walked, only
those whose line's least cost (pipeline.line_bound) is within that room could have gone
in: when there are any, the assembler walks again with them (its walk orders what it is
given, so they fall in place). Every other item would have been skipped by a walk of
all of them, and skipped items change nothing but the pack's list of what was considered.

Why the room is read right: the first walk walks a set closed under "ranked before" (the
shortlist's best, and whatever the assembler may rank before the last of them), plus
rows added out of order (`Shortlist.added`, walked though a row not walked may come
before them). What those took is added back to the room, with a section's wrapper each.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import tiktoken

from memlane.pipeline import context_format as fmt
from memlane.pipeline import line_bound
from memlane.pipeline.assembly import assemble_context
from memlane.pipeline.assembly_types import AssembledContext, AssemblyInput
from memlane.pipeline.user_view import EPISODE, MEMORY, PROCEDURE, FloatArray, Shortlist, UserView

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
) -> AssembledContext:
    """The assembly of `request` from `view`, `relevance` its rows' relevance to the query
    (None without one): the context and decisions of a walk of every item (module
    docstring). `walk_margin` > 0 only sets how far the first walk goes."""
    budget = request.budget_tokens
    shortlist = view.shortlist(
        relevance,
        strategy=request.strategy,
        now=request.now,
        weights=request.weights,
        half_life_hours=request.half_life_hours,
        relevance_floor=request.relevance_floor,
        include_sensitive=request.include_sensitive,
        limit=view.shortlist_size(budget, request.style, walk_margin),
        walk_tokens=walk_margin * budget if walk_margin > 0 else None,
        style=request.style,
    )
    first = assemble_context(_with(request, view, shortlist))
    rest = shortlist.rest
    if not len(rest):
        return first
    encoding, style = request.encoding, request.style
    room = first.room
    if shortlist.added:
        wrapper = _wrapper(encoding)
        for item in first.pack_data["items"]:
            if item["included"] and item["id"] in shortlist.added:
                room += item["tokens"] + wrapper
    # no bound for an encoding of unknown pattern: every item not walked is walked now
    least = view.runs[rest] * line_bound.known(encoding)
    for kind, name in _KINDS.items():
        least[view.kind[rest] == kind] += line_bound.floor(encoding, style, name)
    more = rest[least <= room]
    if not len(more):
        return first
    return assemble_context(_with(request, view, view.widen(shortlist, more)))


def _with(request: AssemblyInput, view: UserView, shortlist: Shortlist) -> AssemblyInput:
    return replace(
        request,
        memories=shortlist.memories,
        relevance=shortlist.relevance,
        soul_blocks=view.soul_blocks,
        episodes=shortlist.episodes,
        procedures=shortlist.procedures,
    )
