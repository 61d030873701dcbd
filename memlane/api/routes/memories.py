"""A user's memories: listed by page, added, read, their history, corrected, forgotten or purged."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Query, Response

from memlane.api.deps import Actor, AgentId, Lane, UserId, needs, v1_router
from memlane.models.api_schemas import ForgetMatching, ForgottenOut
from memlane.models.schemas import MemoryCreate, MemoryEvent, MemoryPage, MemoryPatch, MemoryPublic
from memlane.pipeline.records import MemoryStatus

router = v1_router()


MEMORIES = "/users/{user_id}/memories"


@router.get(MEMORIES, tags=["memories"], dependencies=[needs("read")])
def list_memories(
    user_id: UserId,
    lane: Lane,
    status: MemoryStatus | Literal["all"] = "active",
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: Annotated[
        str | None,
        Query(max_length=200, description="the `next_cursor` of the page before; none first"),
    ] = None,
    agent_id: AgentId = None,
    filter: Annotated[  # the word the other doors use
        str | None,
        Query(
            max_length=8192,
            description='a metadata filter, a JSON object (e.g. {"team": "eng"}): only the '
            "memories whose metadata passes it; a malformed one is a 422 naming the bad part",
        ),
    ] = None,
) -> MemoryPage:
    """The user's memories, newest first, a page at a time: follow `next_cursor` until
    it is null. Exact however the store changes meanwhile (pages are keyed on each
    memory's short id, which never changes)."""
    wanted = None if status == "all" else status
    return lane.memories_page(
        user_id, status=wanted, limit=limit, cursor=cursor, agent_id=agent_id, filter=filter
    )


@router.post(
    MEMORIES,
    status_code=201,
    tags=["memories"],
    dependencies=[needs("write")],
    responses={200: {"model": MemoryPublic, "description": "a stored memory confirmed"}},
)
def add_memory(
    user_id: UserId, memory: MemoryCreate, lane: Lane, actor: Actor, response: Response
) -> MemoryPublic:
    """Add a memory (201); content that duplicates a stored memory by the dedup rule
    confirms that one instead (200, seen once more), and one that duplicates a
    forgotten memory is a 409."""
    stored, created = lane.add_or_confirm(user_id, memory, actor=actor)
    if not created:
        response.status_code = 200
    return stored


@router.get(MEMORIES + "/{memory_id}", tags=["memories"], dependencies=[needs("read")])
def get_memory(user_id: UserId, memory_id: str, lane: Lane) -> MemoryPublic:
    return lane.get_memory(user_id, memory_id)


@router.get(MEMORIES + "/{memory_id}/history", tags=["memories"], dependencies=[needs("read")])
def memory_history(user_id: UserId, memory_id: str, lane: Lane) -> list[MemoryEvent]:
    """The memory's events, oldest first, each with its time and actor: where it came
    from (job, conversation, messages) and every change since. A purged memory, named by
    its full id, keeps only its `purged` event."""
    return lane.memory_history(user_id, memory_id)


@router.patch(MEMORIES + "/{memory_id}", tags=["memories"], dependencies=[needs("write")])
def patch_memory(
    user_id: UserId, memory_id: str, patch: MemoryPatch, lane: Lane, actor: Actor
) -> MemoryPublic:
    """Correct (content, category, importance, confidence, expires_at; a new content is
    re-keyed and re-embedded; expires_at null clears it) and curate (tier, status,
    sensitive) in one transaction; each change lands in the memory's history."""
    return lane.update_memory(user_id, memory_id, patch, actor=actor)


@router.delete(
    MEMORIES + "/{memory_id}", status_code=204, tags=["memories"], dependencies=[needs("write")]
)
def delete_memory(
    user_id: UserId,
    memory_id: str,
    lane: Lane,
    actor: Actor,
    purge: Annotated[
        bool, Query(description="delete it for good, content included (not reversible)")
    ] = False,
) -> Response:
    """Forget: the memory is marked deleted, never reaches a context again and is not
    learned again; reversible (PATCH status active) until purged (`?purge=true`)."""
    if purge:
        lane.purge(user_id, memory_id, actor=actor)
    else:
        lane.forget(user_id, memory_id, actor=actor)
    return Response(status_code=204)


@router.post(
    MEMORIES + "/forget", tags=["memories"], dependencies=[needs("write")], status_code=200
)
def forget_matching(
    user_id: UserId, body: ForgetMatching, lane: Lane, actor: Actor
) -> ForgottenOut:
    """Forget every active memory of the user whose metadata passes the filter (each
    restorable, as one forgotten by id); a filter that passes everything is a 422."""
    assert body.filter is not None  # required by the body's schema
    forgotten = lane.forget_matching(user_id, body.filter, actor=actor)
    return ForgottenOut(forgotten=[m.id for m in forgotten])
