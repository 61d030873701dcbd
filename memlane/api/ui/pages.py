"""The inspector's read-only pages: users, a user's memories, a memory, a context pack
with its "where is?" search, the playground and the jobs. A GET never writes (the
playground assembles without recording anything)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, get_args

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import RedirectResponse

from memlane.api.deps import Lane
from memlane.api.ui import access
from memlane.api.ui.access import require_user
from memlane.api.ui.render import page
from memlane.api.ui.routing import UiRoute, Viewer
from memlane.pipeline.errors import InvalidInputError
from memlane.pipeline.ranking.scoring import STRATEGIES
from memlane.pipeline.records import MemoryStatus, Tier
from memlane.service.inspector import job_board, overview, playground, provenance, where_is
from memlane.service.inspector.fates import INCLUDED
from memlane.service.inspector.memory_table import SORTS, MemoryFilter, memory_rows
from memlane.service.inspector.pack_view import pack_owner, read_pack, texts_reader, view_of

router = APIRouter(prefix="/ui", route_class=UiRoute, include_in_schema=False)

Text = Annotated[str, Query(max_length=500)]
CHOICES = {
    "status": get_args(MemoryStatus),
    "tier": get_args(Tier),
    "sort": SORTS,
    "strategy": STRATEGIES,
    "style": playground.STYLES,
}


def _choices(lane: Lane) -> dict[str, tuple[str, ...]]:
    """The closed choices, with the configured categories (MEMLANE_CATEGORIES)."""
    return {**CHOICES, "category": tuple(lane.settings.categories)}


def _choice(name: str, value: str, choices: dict[str, tuple[str, ...]] = CHOICES) -> Any:
    if value and value not in choices[name]:
        raise InvalidInputError(f"{name}: one of {', '.join(choices[name])}")
    return value or None


def _day(name: str, value: str) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value + "T00:00:00+00:00")
    except ValueError:
        raise InvalidInputError(f"{name}: a date as YYYY-MM-DD, not {value!r}") from None


@router.get("")
def home(viewer: Viewer) -> Response:
    return RedirectResponse("/ui/users", status_code=303)


@router.get("/users")
def users(request: Request, viewer: Viewer, lane: Lane, q: Text = "") -> Response:
    within = viewer.grant.users if viewer.grant is not None else ()
    found = overview.find_users(lane.url, q, within=within) if q.strip() else []
    found = [user for user in found if access.may_see_user(viewer, user)]
    return page(request, "users.html", q=q, found=found, searched=bool(q.strip()))


@router.get("/users/{user_id}")
def user(
    request: Request,
    viewer: Viewer,
    lane: Lane,
    user_id: str,
    status: Text = "",
    tier: Text = "",
    category: Text = "",
    text: Text = "",
    since: Text = "",
    until: Text = "",
    sort: Text = "newest",
) -> Response:
    require_user(viewer, user_id)
    summary = overview.user_summary(lane.url, user_id)
    choices = _choices(lane)
    wanted = MemoryFilter(
        status=_choice("status", status),
        tier=_choice("tier", tier),
        category=_choice("category", category, choices),
        text=text,
        since=_day("since", since),
        until=_day("until", until),
        sort=_choice("sort", sort) or "newest",
    )
    scores: dict[str, float] = {}
    if wanted.sort == "score":
        hits = lane.search(
            user_id,
            text or None,
            limit=200,
            category=wanted.category,
            tier=wanted.tier,
            since=wanted.since,
        )
        rows = [hit.memory for hit in hits]
        scores = {hit.memory.id: hit.score for hit in hits}
    else:
        rows = memory_rows(lane.url, user_id, wanted)
    jobs = job_board.job_lines(lane.url, status=None, user_id=user_id, limit=20)
    return page(
        request,
        "user.html",
        summary=summary,
        rows=rows,
        scores=scores,
        wanted=wanted,
        choices=choices,
        jobs=jobs,
    )


@router.get("/users/{user_id}/memories/{memory_id}")
def memory(
    request: Request, viewer: Viewer, lane: Lane, user_id: str, memory_id: str, query: Text = ""
) -> Response:
    require_user(viewer, user_id)
    found = lane.get_memory(user_id, memory_id)
    history = lane.memory_history(user_id, found.id)
    source = provenance.memory_source(lane.url, user_id, found.id)
    hit = None
    if query.strip():
        hits = lane.search(user_id, query, limit=200, include_sensitive=True)
        hit = next((h for h in hits if h.memory.id == found.id), None)
    return page(
        request,
        "memory.html",
        memory=found,
        history=history,
        source=source,
        query=query,
        hit=hit,
        # a category since removed from the set is kept as it is (an edit may keep it)
        categories=tuple(dict.fromkeys((*lane.settings.categories, found.category))),
    )


@router.get("/packs/{pack_id}")
def pack(
    request: Request,
    viewer: Viewer,
    lane: Lane,
    pack_id: str,
    where: Text = "",
    fate: Text = "",
    offset: Annotated[int, Query(ge=0)] = 0,
) -> Response:
    user_id = require_user(viewer, pack_owner(lane.url, pack_id))
    body = read_pack(lane.url, pack_id)
    texts = texts_reader(lane.url, user_id)
    floor = lane.settings.relevance_floor
    view = view_of(body, texts, relevance_floor=floor, fate=fate, offset=offset)
    answer = None
    if where.strip():
        answer = where_is.where_is(
            lane.url,
            view,
            where,
            dedup_threshold=lane.settings.dedup_threshold,
            dedup_min_keywords=lane.settings.dedup_min_keywords,
        )
        shown = {row.id for row in view.rows}
        if answer.candidate_id is not None and answer.candidate_id not in shown:
            view = view_of(body, texts, relevance_floor=floor, focus=answer.candidate_id)
    return page(request, "pack.html", view=view, where=where, answer=answer, included=INCLUDED)


@router.get("/users/{user_id}/playground")
def playground_page(
    request: Request,
    viewer: Viewer,
    lane: Lane,
    user_id: str,
    query: Text = "",
    budget: Annotated[int, Query(ge=1, le=playground.MAX_BUDGET)] = 0,
    strategy: Text = "scored",
    style: Text = "",
    run: bool = False,
) -> Response:
    require_user(viewer, user_id)
    trial = playground.Trial(
        user_id=user_id,
        query=query.strip() or None,
        budget_tokens=budget or lane.settings.default_budget_tokens,
        strategy=strategy or "scored",
        style=style or lane.settings.context_style,
    )
    view = None
    if run:
        view = playground.run(lane.contexts, trial, relevance_floor=lane.settings.relevance_floor)
    return page(
        request,
        "playground.html",
        trial=trial,
        view=view,
        choices=CHOICES,
        included=INCLUDED,
    )


@router.get("/jobs")
def jobs(request: Request, viewer: Viewer, lane: Lane, status: Text = "failed") -> Response:
    if status not in job_board.BOARD_STATUSES:
        raise InvalidInputError(f"status: one of {', '.join(job_board.BOARD_STATUSES)}")
    lines = [
        line
        for line in job_board.job_lines(lane.url, status=status, limit=200)
        if access.may_see_user(viewer, line.job.user_id)
    ]
    return page(request, "jobs.html", lines=lines, status=status, statuses=job_board.BOARD_STATUSES)
