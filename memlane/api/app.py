"""The HTTP front door: FastAPI routes over the facade, bearer API keys, and the error
shape and size limits of memlane.api.errors.

Serve it with `uvicorn --factory memlane.api.app:create_app`. Routes that call the facade are
plain `def`: the facade is synchronous, so FastAPI runs each call in its thread pool.
Regenerate the checked-in OpenAPI document with
`python -m memlane.api.app --write-openapi docs/openapi.json`.

Over 400 lines: one short function per route, in the order of the OpenAPI document, with
the app factory and its dependencies; the bodies are in memlane.models.api_schemas, the keys in
memlane.service.api_keys, the error shape in memlane.api.errors.
"""

from __future__ import annotations

import argparse
import json
import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, FastAPI, Query, Request, Response
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi_offline import FastAPIOffline
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from memlane.api import errors as api_errors
from memlane.api.errors import ApiError, ErrorOut, error_response
from memlane.api.metrics import ApiMetrics
from memlane.config.settings import Settings, get_settings
from memlane.models.api_schemas import (
    ContextOut,
    ContextRequest,
    ConversationDeletedOut,
    ErasedOut,
    ImportedOut,
    LiftedOut,
    ProcedureIn,
    SoulIn,
    SweepOut,
)
from memlane.models.schemas import (
    EnqueueResult,
    FleetStatus,
    JobPublic,
    MemoryCreate,
    MemoryEvent,
    MemoryPage,
    MemoryPatch,
    MemoryPublic,
    SearchHit,
    SearchRequest,
    TranscriptIn,
)
from memlane.pipeline.records import MemoryStatus, Procedure, SoulBlock, SoulKind
from memlane.service.api_keys import key_actor
from memlane.service.facade import Memlane
from memlane.service.readiness import check_database

log = logging.getLogger("memlane.api")
TRANSCRIPTS_PATH = "/v1/transcripts"


class Runtime:
    """One app's settings and lane, resolved on first need; a lane built here is closed
    on shutdown, a lane handed in belongs to the caller."""

    def __init__(self, lane: Memlane | None, settings: Settings | None) -> None:
        self._lane = lane
        self._settings = settings or (lane.settings if lane is not None else None)
        self._owns_lane = lane is None
        self._lock = threading.Lock()

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = get_settings()
        return self._settings

    @property
    def built(self) -> Memlane | None:
        """The lane once built (one attribute read: no lock needed)."""
        return self._lane

    def lane(self) -> Memlane:
        with self._lock:
            if self._lane is None:
                self._lane = Memlane(self.settings)
            return self._lane

    def close(self) -> None:
        with self._lock:
            if self._owns_lane and self._lane is not None:
                self._lane.close()
                self._lane = None


# --------------------------------------------------------------------------- dependencies


def runtime_of(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


async def get_lane(request: Request) -> Memlane:
    # async, so a request does not hop to the thread pool and back just to be handed the
    # lane; building it (when the start could not) blocks, so that runs in the pool
    runtime = runtime_of(request)
    lane = runtime.built
    return lane if lane is not None else await run_in_threadpool(runtime.lane)


bearer = HTTPBearer(auto_error=False, description="an API key from MEMLANE_API_KEYS")


async def require_key(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> None:
    """With keys configured, the bearer token must equal one of them (constant time).
    The key's name becomes the actor of the changes the request makes."""
    keys = runtime_of(request).settings.api_keys
    given = credentials.credentials if credentials is not None else ""
    actor = key_actor(given, keys)
    if actor is None:
        raise ApiError(401, "unauthorized", "send a valid API key: Authorization: Bearer <key>")
    request.state.actor = actor


def actor_of(request: Request) -> str:
    return str(getattr(request.state, "actor", "api"))


Lane = Annotated[Memlane, Depends(get_lane)]
Actor = Annotated[str, Depends(actor_of)]
UserId = Annotated[str, PathParam(min_length=1, max_length=200)]
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorOut} for status in (401, 404, 409, 413, 422, 500, 503)
}

v1 = APIRouter(prefix="/v1", dependencies=[Depends(require_key)], responses=ERRORS)
health = APIRouter(tags=["health"])


# --------------------------------------------------------------------------- routes


@v1.post(TRANSCRIPTS_PATH.removeprefix("/v1"), status_code=202, tags=["ingest"])
def post_transcript(transcript: TranscriptIn, lane: Lane, request: Request) -> EnqueueResult:
    """Store the messages and queue the extraction jobs now due; never waits for them."""
    result = lane.enqueue(transcript)
    enqueued = metrics_of(request).enqueued
    enqueued.labels("transcripts").inc()
    enqueued.labels("messages").inc(result.stored_messages)
    enqueued.labels("jobs").inc(len(result.job_ids))
    return result


@v1.get("/jobs/{job_id}", tags=["jobs"])
def get_job(job_id: str, lane: Lane) -> JobPublic:
    return lane.job(job_id)


@v1.post("/jobs/{job_id}/retry", status_code=202, tags=["jobs"])
def retry_job(job_id: str, lane: Lane) -> JobPublic:
    """Re-queue a failed job, or a queued one untouched for MEMLANE_STUCK_AFTER_S (its
    message lost or never sent); 409 for any other."""
    return lane.retry_job(job_id)


@v1.post("/jobs/sweep", status_code=202, tags=["jobs"])
def sweep_jobs(lane: Lane) -> SweepOut:
    """Publish every queued job again (after the broker was down, say), release stuck
    ones, start idle conversations' tails and apply retention: beat's sweep, at once."""
    result = lane.sweep()
    return SweepOut(
        extract=result.extract,
        store=result.store,
        tails=result.tails,
        messages_purged=result.messages_purged,
        packs_deleted=result.packs_deleted,
    )


@v1.get("/status", tags=["jobs"])
def fleet_status(lane: Lane) -> FleetStatus:
    """Whether workers answer for each queue (1 s broadcast, cached ~5 s) and the
    queues' depths: `ok`, or `degraded` with the problems. Always 200: a fleet with no
    workers still serves contexts; /readyz is the gate."""
    return lane.status()


@v1.delete("/users/{user_id}", tags=["users"])
def erase_user(user_id: UserId, lane: Lane) -> ErasedOut:
    """Delete every row of the user, in one transaction ("delete my data"); for good."""
    return ErasedOut(user_id=user_id, deleted=lane.erase_user(user_id))


@v1.delete("/users/{user_id}/fingerprints", tags=["users"])
def lift_fingerprints(user_id: UserId, lane: Lane) -> LiftedOut:
    """Delete the fingerprints the user's purges left: purged facts may be learned again
    from later conversations."""
    return LiftedOut(user_id=user_id, lifted=lane.lift_fingerprints(user_id))


@v1.delete("/users/{user_id}/conversations/{conversation_id}", tags=["users"])
def delete_conversation(
    user_id: UserId, conversation_id: str, lane: Lane, actor: Actor
) -> ConversationDeletedOut:
    """Delete one conversation ("delete this chat"): its messages, jobs, episodes and
    the memories learned only from it; for good."""
    counts = lane.delete_conversation(user_id, conversation_id, actor=actor)
    return ConversationDeletedOut(user_id=user_id, conversation_id=conversation_id, deleted=counts)


NDJSON = "application/x-ndjson"


@v1.get(
    "/users/{user_id}/export",
    tags=["users"],
    response_class=StreamingResponse,
    responses={200: {"content": {NDJSON: {}}, "description": "the export, one JSON a line"}},
)
def export_user(
    user_id: UserId,
    lane: Lane,
    messages: Annotated[bool, Query(description="include conversations and messages")] = False,
) -> StreamingResponse:
    """The user's data as JSON lines (`memlane users export`): memories with their
    keywords, vectors and history, episodes, procedures, soul blocks, and optionally
    the messages; for `POST …/import` of another deployment."""
    lines = lane.export_user(user_id, messages=messages)
    return StreamingResponse((line + "\n" for line in lines), media_type=NDJSON)


@v1.post(
    "/users/{user_id}/import",
    tags=["users"],
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
    """Import an export as this user, ids kept; 409 when the store holds some of its ids
    (unless `merge`). The body limit (MEMLANE_MAX_BODY_BYTES) applies: import a large
    user with the CLI."""
    body = await request.body()
    counts = await run_in_threadpool(
        lane.import_user, body.splitlines(), user_id=user_id, merge=merge
    )
    return ImportedOut(user_id=user_id, imported=counts)


@v1.post("/context", tags=["context"])
def post_context(body: ContextRequest, lane: Lane, request: Request) -> ContextOut:
    """The context block for the user's next model call, its selection as data and its
    context pack. Only the XML block is counted against the budget."""
    options = body.model_dump(exclude={"user_id", "query", "format"})
    try:
        result = lane.assemble(body.user_id, body.query, **options)
    except ValueError as exc:
        raise ApiError(422, "validation_error", str(exc)) from None
    metrics = metrics_of(request)
    metrics.assemble_tokens.observe(result.pack.used_tokens)
    metrics.assemble_items.observe(sum(1 for item in result.pack.items if item.included))
    text = result.text
    if body.format == "json":
        text = json.dumps(result.json, ensure_ascii=False, separators=(",", ":"))
    return ContextOut(context=text, selection=dict(result.json), pack=result.pack)


@v1.post("/search", tags=["context"])
def post_search(body: SearchRequest, lane: Lane) -> list[SearchHit]:
    """The user's memories for a query, best first, each with its score and the score's
    parts (relevance, importance, recency, frequency): the assembler's ranking, no
    budget and no XML."""
    return lane.search(**body.model_dump())


@v1.get("/packs/{pack_id}", tags=["context"])
def get_pack(pack_id: str, lane: Lane) -> dict[str, Any]:
    """A context pack as logged; packs are written in the background, so a pack may be
    404 for a moment after its context was returned."""
    return lane.pack(pack_id)


MEMORIES = "/users/{user_id}/memories"


@v1.get(MEMORIES, tags=["memories"])
def list_memories(
    user_id: UserId,
    lane: Lane,
    status: MemoryStatus | Literal["all"] = "active",
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: Annotated[
        str | None,
        Query(max_length=200, description="the `next_cursor` of the page before; none first"),
    ] = None,
) -> MemoryPage:
    """The user's memories, newest first, a page at a time: follow `next_cursor` until
    it is null. Exact however the store changes meanwhile (pages are keyed on each
    memory's short id, which never changes)."""
    wanted = None if status == "all" else status
    return lane.memories_page(user_id, status=wanted, limit=limit, cursor=cursor)


@v1.post(
    MEMORIES,
    status_code=201,
    tags=["memories"],
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


@v1.get(MEMORIES + "/{memory_id}", tags=["memories"])
def get_memory(user_id: UserId, memory_id: str, lane: Lane) -> MemoryPublic:
    return lane.get_memory(user_id, memory_id)


@v1.get(MEMORIES + "/{memory_id}/history", tags=["memories"])
def memory_history(user_id: UserId, memory_id: str, lane: Lane) -> list[MemoryEvent]:
    """The memory's events, oldest first, each with its time and actor: where it came
    from (job, conversation, messages) and every change since. A purged memory, named by
    its full id, keeps only its `purged` event."""
    return lane.memory_history(user_id, memory_id)


@v1.patch(MEMORIES + "/{memory_id}", tags=["memories"])
def patch_memory(
    user_id: UserId, memory_id: str, patch: MemoryPatch, lane: Lane, actor: Actor
) -> MemoryPublic:
    """Correct (content, category, importance, confidence, expires_at; a new content is
    re-keyed and re-embedded; expires_at null clears it) and curate (tier, status,
    sensitive) in one transaction; each change lands in the memory's history."""
    return lane.update_memory(user_id, memory_id, patch, actor=actor)


@v1.delete(MEMORIES + "/{memory_id}", status_code=204, tags=["memories"])
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


@v1.put("/users/{user_id}/soul/{kind}", tags=["soul"])
def put_soul_block(user_id: UserId, kind: SoulKind, body: SoulIn, lane: Lane) -> SoulBlock:
    return lane.set_soul_block(user_id, kind, body.content)


@v1.get("/users/{user_id}/soul", tags=["soul"])
def list_soul_blocks(user_id: UserId, lane: Lane) -> list[SoulBlock]:
    return lane.soul_blocks(user_id)


@v1.delete("/users/{user_id}/soul/{kind}", status_code=204, tags=["soul"])
def delete_soul_block(user_id: UserId, kind: SoulKind, lane: Lane) -> Response:
    """Delete the user's soul block of that kind; 404 if they have none."""
    lane.delete_soul_block(user_id, kind)
    return Response(status_code=204)


@v1.post("/users/{user_id}/procedures", status_code=201, tags=["procedures"])
def add_procedure(user_id: UserId, body: ProcedureIn, lane: Lane) -> Procedure:
    return lane.add_procedure(user_id, body.name, body.content)


@v1.get("/users/{user_id}/procedures", tags=["procedures"])
def list_procedures(user_id: UserId, lane: Lane) -> list[Procedure]:
    return lane.procedures(user_id)


@v1.delete("/users/{user_id}/procedures/{procedure}", status_code=204, tags=["procedures"])
def delete_procedure(user_id: UserId, procedure: str, lane: Lane) -> Response:
    """Delete the user's procedure named by its id or its name."""
    lane.delete_procedure(user_id, procedure)
    return Response(status_code=204)


def metrics_of(request: Request) -> ApiMetrics:
    metrics: ApiMetrics = request.app.state.metrics
    return metrics


@health.get(
    "/metrics",
    dependencies=[Depends(require_key)],
    response_class=PlainTextResponse,
    responses={401: {"model": ErrorOut}},
)
def prometheus_metrics(request: Request) -> Response:
    """Prometheus metrics: request latency per route, assemblies, enqueues, and job
    figures read from the store (memlane.api.metrics)."""
    return metrics_of(request).render()


@health.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is alive (no dependency is checked)."""
    return {"status": "ok"}


@health.get("/readyz", responses={503: {"model": ErrorOut}})
def readyz(request: Request) -> JSONResponse:
    """What the API itself needs: the database reachable and its schema current (503
    not_ready otherwise). Workers and the broker are /v1/status's: with none, contexts
    are still assembled, so that must not take the API out of rotation."""
    checks = check_database(runtime_of(request).settings.resolved_database_url)
    failed = {name: state for name, state in checks.items() if state != "ok"}
    if failed:
        message = "not ready: " + "; ".join(f"{k}: {v}" for k, v in failed.items())
        return error_response(503, "not_ready", message, checks=checks)
    return JSONResponse({"status": "ready", "checks": checks})


# --------------------------------------------------------------------------- the app


class _Timed:
    """The metrics' request timing as a middleware class (ApiMetrics.timing)."""

    def __init__(self, app: ASGIApp, metrics: ApiMetrics) -> None:
        self._timed = metrics.timing(app)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._timed(scope, receive, send)


def create_app(lane: Memlane | None = None, settings: Settings | None = None) -> FastAPI:
    """The API over `lane`, or over a lane built from `settings` (default: the
    environment) at startup. Reads nothing until it starts or gets a request."""
    runtime = Runtime(lane, settings)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        _ = runtime.settings  # invalid settings stop the server at start
        try:
            await run_in_threadpool(runtime.lane)
        except Exception as exc:  # the database may come up later; /readyz says why not
            log.warning("memlane not ready at start (retried on first request): %s", exc)
        yield
        await run_in_threadpool(runtime.close)

    # /docs (Swagger UI) and /redoc with their scripts and styles served from the
    # fastapi-offline package: FastAPI's own pages load them from a CDN, blank offline.
    app = FastAPIOffline(
        title="memlane",
        version=version("memlane"),
        description="Long-term memory for LLM chat apps. Errors: "
        '`{"error": {"code": "...", "message": "..."}}` with stable codes.',
        lifespan=lifespan,
    )
    app.state.runtime = runtime
    app.state.metrics = ApiMetrics(lambda: runtime.settings.resolved_database_url)
    app.add_middleware(_Timed, metrics=app.state.metrics)
    app.include_router(v1)
    app.include_router(health)
    api_errors.install(
        app,
        max_body_bytes=lambda: runtime.settings.max_body_bytes,
        transcript_paths={TRANSCRIPTS_PATH},
    )
    return app


def openapi_document() -> dict[str, Any]:
    return create_app().openapi()


def render_openapi() -> str:
    return json.dumps(openapi_document(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memlane.api.app")
    parser.add_argument("--write-openapi", metavar="PATH", required=True, type=Path)
    args = parser.parse_args(argv)
    target: Path = args.write_openapi
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_openapi(), encoding="utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
