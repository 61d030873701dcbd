"""The HTTP front door: FastAPI routes over the facade, bearer API keys, and the error
shape and size limits of memlane.api_errors.

Serve it with `uvicorn --factory memlane.api:create_app`. Routes that call the facade are
plain `def`: the facade is synchronous, so FastAPI runs each call in its thread pool.
Regenerate the checked-in OpenAPI document with
`python -m memlane.api --write-openapi docs/openapi.json`.
"""

from __future__ import annotations

import argparse
import hmac
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
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from memlane import api_errors
from memlane.api_errors import ApiError, ErrorOut, error_response
from memlane.api_metrics import ApiMetrics
from memlane.config.settings import Settings, get_settings
from memlane.facade import Memlane
from memlane.models.schemas import (
    MAX_MESSAGE_CHARS,
    EnqueueResult,
    Identifier,
    JobPublic,
    MemoryCreate,
    MemoryPublic,
    SearchHit,
    SearchRequest,
    StoredText,
    TranscriptIn,
    UserIdIn,
)
from memlane.pipeline.assembly_types import ContextPack
from memlane.pipeline.budget import MAX_BUDGET_TOKENS
from memlane.pipeline.context_format import Style
from memlane.pipeline.records import MemoryStatus, Procedure, SoulBlock, SoulKind, Tier
from memlane.pipeline.scoring import Strategy
from memlane.readiness import check_broker, check_database

log = logging.getLogger("memlane.api")
TRANSCRIPTS_PATH = "/v1/transcripts"


class ContextRequest(BaseModel):
    """Budget: `budget_tokens` when given, else derived from `context_window` and the
    reservations (unset ones come from settings), else the default budget."""

    model_config = ConfigDict(extra="forbid")

    user_id: UserIdIn
    query: StoredText | None = Field(None, max_length=MAX_MESSAGE_CHARS)
    strategy: Strategy = "scored"
    budget_tokens: int | None = Field(None, ge=1, le=MAX_BUDGET_TOKENS)
    context_window: int | None = Field(None, ge=1, le=MAX_BUDGET_TOKENS)
    system_prompt_tokens: int | None = Field(None, ge=0, le=MAX_BUDGET_TOKENS)
    user_message_tokens: int | None = Field(None, ge=0, le=MAX_BUDGET_TOKENS)
    output_headroom: int | None = Field(None, ge=0, le=MAX_BUDGET_TOKENS)
    safety_margin: float | None = Field(None, ge=0.0, lt=1.0)
    model: str | None = Field(None, max_length=200, description="tokenizer of this model")
    include_sensitive: bool = False
    style: Style | None = Field(
        None, description="default, or compact (ids and content only) for tight budgets"
    )
    format: Literal["xml", "json"] = Field(
        "xml", description="`context` as the XML block (counted against the budget) or as JSON"
    )


class ContextOut(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    context: str
    selection: dict[str, Any] = Field(alias="json")
    pack: ContextPack


class MemoryPatch(BaseModel):
    """Fields left out (or null) are not changed."""

    model_config = ConfigDict(extra="forbid")

    tier: Tier | None = None
    status: Literal["active", "quarantined", "deleted"] | None = None
    sensitive: bool | None = None


class SoulIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    content: StoredText = Field(min_length=1, max_length=20_000)


class ProcedureIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: Identifier
    content: StoredText = Field(min_length=1, max_length=20_000)


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


def get_lane(request: Request) -> Memlane:
    return runtime_of(request).lane()


bearer = HTTPBearer(auto_error=False, description="an API key from MEMLANE_API_KEYS")


async def require_key(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> None:
    """With keys configured, the bearer token must equal one of them (constant time)."""
    keys = runtime_of(request).settings.api_keys
    if not keys:
        return
    given = credentials.credentials.encode() if credentials is not None else b""
    matches = [hmac.compare_digest(given, key.get_secret_value().encode()) for key in keys]
    if not given or not any(matches):
        raise ApiError(401, "unauthorized", "send a valid API key: Authorization: Bearer <key>")


Lane = Annotated[Memlane, Depends(get_lane)]
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


class SweepOut(BaseModel):
    extract: list[str] = Field(description="jobs published to the extract queue")
    store: list[str] = Field(description="jobs published to the store queue")
    tails: int = Field(description="tail jobs started for idle conversations")


@v1.post("/jobs/sweep", status_code=202, tags=["jobs"])
def sweep_jobs(lane: Lane) -> SweepOut:
    """Publish every queued job again (after the broker was down, say), release stuck
    ones and start idle conversations' tails: beat's sweep, at once."""
    result = lane.sweep()
    return SweepOut(extract=result.extract, store=result.store, tails=result.tails)


class ErasedOut(BaseModel):
    user_id: str
    deleted: dict[str, int] = Field(description="rows deleted per table")


@v1.delete("/users/{user_id}", tags=["users"])
def erase_user(user_id: UserId, lane: Lane) -> ErasedOut:
    """Delete every row of the user, in one transaction ("delete my data"); for good."""
    return ErasedOut(user_id=user_id, deleted=lane.erase_user(user_id))


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
    offset: Annotated[int, Query(ge=0)] = 0,
) -> list[MemoryPublic]:
    wanted = None if status == "all" else status
    return lane.list_memories(user_id, status=wanted, limit=limit, offset=offset)


@v1.post(MEMORIES, status_code=201, tags=["memories"])
def add_memory(user_id: UserId, memory: MemoryCreate, lane: Lane) -> MemoryPublic:
    return lane.add_memory(user_id, memory)


@v1.get(MEMORIES + "/{memory_id}", tags=["memories"])
def get_memory(user_id: UserId, memory_id: str, lane: Lane) -> MemoryPublic:
    return lane.get_memory(user_id, memory_id)


@v1.patch(MEMORIES + "/{memory_id}", tags=["memories"])
def patch_memory(user_id: UserId, memory_id: str, patch: MemoryPatch, lane: Lane) -> MemoryPublic:
    """Pin or verify (tier), quarantine, restore or delete (status), mark sensitive."""
    return lane.update_memory(
        user_id, memory_id, tier=patch.tier, status=patch.status, sensitive=patch.sensitive
    )


@v1.delete(MEMORIES + "/{memory_id}", status_code=204, tags=["memories"])
def delete_memory(
    user_id: UserId,
    memory_id: str,
    lane: Lane,
    purge: Annotated[
        bool, Query(description="delete it for good, content included (not reversible)")
    ] = False,
) -> Response:
    """Forget: the memory is marked deleted, never reaches a context again and is not
    learned again; reversible (PATCH status active) until purged (`?purge=true`)."""
    if purge:
        lane.purge(user_id, memory_id)
    else:
        lane.forget(user_id, memory_id)
    return Response(status_code=204)


@v1.put("/users/{user_id}/soul/{kind}", tags=["soul"])
def put_soul_block(user_id: UserId, kind: SoulKind, body: SoulIn, lane: Lane) -> SoulBlock:
    return lane.set_soul_block(user_id, kind, body.content)


@v1.get("/users/{user_id}/soul", tags=["soul"])
def list_soul_blocks(user_id: UserId, lane: Lane) -> list[SoulBlock]:
    return lane.soul_blocks(user_id)


@v1.post("/users/{user_id}/procedures", status_code=201, tags=["procedures"])
def add_procedure(user_id: UserId, body: ProcedureIn, lane: Lane) -> Procedure:
    return lane.add_procedure(user_id, body.name, body.content)


@v1.get("/users/{user_id}/procedures", tags=["procedures"])
def list_procedures(user_id: UserId, lane: Lane) -> list[Procedure]:
    return lane.procedures(user_id)


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
    figures read from the store (memlane.api_metrics)."""
    return metrics_of(request).render()


@health.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is alive (no dependency is checked)."""
    return {"status": "ok"}


@health.get("/readyz", responses={503: {"model": ErrorOut}})
def readyz(request: Request) -> JSONResponse:
    """The database is reachable and its schema current, and the broker (when
    MEMLANE_BROKER_URL is set) answers a ping."""
    settings = runtime_of(request).settings
    checks = check_database(settings.resolved_database_url)
    if settings.broker_url is not None:
        checks["broker"] = check_broker(settings.broker_url)
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

    app = FastAPI(
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
    parser = argparse.ArgumentParser(prog="python -m memlane.api")
    parser.add_argument("--write-openapi", metavar="PATH", required=True, type=Path)
    args = parser.parse_args(argv)
    target: Path = args.write_openapi
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_openapi(), encoding="utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
