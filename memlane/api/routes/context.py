"""Context: an assembled context, a search of the user's memories, a stored context pack."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request

from memlane.api.deps import Key, Lane, metrics_of, needs, reach, v1_router
from memlane.api.errors import ApiError
from memlane.models.api_schemas import ContextOut, ContextRequest
from memlane.models.schemas import SearchHit, SearchRequest
from memlane.pipeline import error_codes as codes

router = v1_router()


@router.post("/context", tags=["context"], dependencies=[needs("read")])
def post_context(body: ContextRequest, lane: Lane, request: Request, key: Key) -> ContextOut:
    """The context block for the user's next model call, its selection as data and its
    context pack. Only the XML block is counted against the budget."""
    reach(key, body.user_id)
    options = body.model_dump(exclude={"user_id", "query", "format"})
    try:
        result = lane.assemble(body.user_id, body.query, **options)
    except ValueError as exc:
        raise ApiError(codes.VALIDATION_ERROR, str(exc)) from None
    metrics = metrics_of(request)
    metrics.assemble_tokens.observe(result.pack.used_tokens)
    metrics.assemble_items.observe(sum(1 for item in result.pack.items if item.included))
    text = result.text
    if body.format == "json":
        text = json.dumps(result.json, ensure_ascii=False, separators=(",", ":"))
    return ContextOut(context=text, selection=dict(result.json), pack=result.pack)


@router.post("/search", tags=["context"], dependencies=[needs("read")])
def post_search(body: SearchRequest, lane: Lane, key: Key) -> list[SearchHit]:
    """The user's memories for a query, best first, each with its score and the score's
    parts (relevance, importance, recency, frequency): the assembler's ranking, no
    budget and no XML."""
    reach(key, body.user_id)
    return lane.search(**body.model_dump())


@router.get("/packs/{pack_id}", tags=["context"], dependencies=[needs("read")])
def get_pack(pack_id: str, lane: Lane, key: Key) -> dict[str, Any]:
    """A context pack as logged; packs are written in the background, so a pack may be
    404 for a moment after its context was returned. A pack belongs to its user: 404 to
    a key that does not reach them."""
    pack = lane.pack(pack_id)
    reach(key, str(pack.get("user_id", "")))
    return pack
