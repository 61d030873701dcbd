"""A user as a whole: erased, their purged fingerprints lifted, a conversation deleted,
their data exported and imported."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from memlane.api.deps import Actor, Lane, UserId, needs, v1_router
from memlane.models.api_schemas import ConversationDeletedOut, ErasedOut, ImportedOut, LiftedOut
from memlane.models.store.users.export import TABLES

router = v1_router()


@router.delete("/users/{user_id}", tags=["users"], dependencies=[needs("write")])
def erase_user(user_id: UserId, lane: Lane) -> ErasedOut:
    """Delete every row of the user, in one transaction ("delete my data"); for good."""
    return ErasedOut(user_id=user_id, deleted=lane.erase_user(user_id))


@router.delete("/users/{user_id}/fingerprints", tags=["users"], dependencies=[needs("write")])
def lift_fingerprints(user_id: UserId, lane: Lane) -> LiftedOut:
    """Delete the fingerprints the user's purges left: purged facts may be learned again
    from later conversations."""
    return LiftedOut(user_id=user_id, lifted=lane.lift_fingerprints(user_id))


@router.delete(
    "/users/{user_id}/conversations/{conversation_id:path}",
    tags=["users"],
    dependencies=[needs("write")],
)
def delete_conversation(
    user_id: UserId, conversation_id: str, lane: Lane, actor: Actor
) -> ConversationDeletedOut:
    """Delete one conversation ("delete this chat"): its messages, jobs, episodes and
    the memories learned only from it; for good."""
    counts = lane.delete_conversation(user_id, conversation_id, actor=actor)
    return ConversationDeletedOut(user_id=user_id, conversation_id=conversation_id, deleted=counts)


NDJSON = "application/x-ndjson"


@router.get(
    "/users/{user_id}/export",
    tags=["users"],
    dependencies=[needs("read")],
    response_class=StreamingResponse,
    responses={200: {"content": {NDJSON: {}}, "description": "the export, one JSON a line"}},
)
def export_user(
    user_id: UserId,
    lane: Lane,
    messages: Annotated[bool, Query(description="include conversations and messages")] = False,
    agent_id: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=200,
            description="what this agent sees: the shared data and its own; without one, "
            "every agent's",
        ),
    ] = None,
    filter: Annotated[  # the word the other doors use
        str | None,
        Query(
            max_length=8192,
            description="a metadata filter, a JSON object: only the conversations, memories "
            "and episodes whose metadata passes it (a 422 naming the bad part otherwise)",
        ),
    ] = None,
) -> StreamingResponse:
    """The user's data as JSON lines (`memlane users export`): memories with their
    keywords, vectors and history, episodes, procedures, soul blocks, and optionally
    the messages; for `POST …/import` of another deployment."""
    lines = lane.export_user(user_id, messages=messages, agent_id=agent_id, filter=filter)
    return StreamingResponse((line + "\n" for line in lines), media_type=NDJSON)


@router.post(
    "/users/{user_id}/import",
    tags=["users"],
    dependencies=[needs("write")],
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {NDJSON: {"schema": {"type": "string"}}},
            "description": "an export (GET …/export, memlane users export)",
        }
    },
)
async def import_user(
    user_id: UserId,
    request: Request,
    lane: Lane,
    merge: Annotated[
        bool, Query(description="keep what is stored for ids the store holds, add the rest")
    ] = False,
) -> ImportedOut:
    """Import an export as this user, ids kept (another user's ids: a copy under new
    ids); every row is validated first (422 naming the line and field, nothing written);
    409 when the user holds some of its ids (unless `merge`). The body limit
    (MEMLANE_MAX_BODY_BYTES) applies: import a large user with the CLI."""
    body = await request.body()
    counts = await run_in_threadpool(
        lane.import_user, body.splitlines(), user_id=user_id, merge=merge
    )
    imported = {k: n for k, n in counts.items() if k in TABLES}
    details = {k: n for k, n in counts.items() if k not in TABLES}
    return ImportedOut(user_id=user_id.strip(), imported=imported, details=details)
