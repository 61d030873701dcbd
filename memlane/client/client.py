"""A typed HTTP client for memlane's API: `Client` (sync) and `AsyncClient` (asyncio), on
httpx. A chat app needs no database credentials, only the API's address and a key:

    from memlane.client import Client

    with Client("http://127.0.0.1:8000", api_key="...") as memlane:
        memlane.enqueue({"conversation_id": "c1", "user_id": "u1", "messages": messages})
        prompt = memlane.context("u1", "what does the user prefer?", budget_tokens=2000).context

The address and key come from the arguments, else from MEMLANE_CLIENT_URL and
MEMLANE_CLIENT_KEY (the server's keys are MEMLANE_API_KEYS: another variable, another
side). One method per route of the API, with the API's own request and answer models;
errors are the typed errors of `memlane.client.errors`. A 503 is retried with exponential
backoff, and nothing else: a 503 means the server did nothing (not ready, database down)
or, for a transcript whose broker was down, stored it and queued its jobs, which a
re-sent transcript does not store twice.

Over 400 lines: `Client` and `AsyncClient` are one method per route each, kept side by
side so a route added to one is seen missing from the other (test_client also checks
every route has both). What they share, each route's request and answer (`_Calls`), the
settings and the retry rule, is written once; only the send (httpx sync or async)
differs.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

import httpx
from pydantic import TypeAdapter

from memlane.client.errors import ConnectionFailed, error_from
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
from memlane.pipeline.records import (
    Category,
    MemoryStatus,
    Procedure,
    SoulBlock,
    SoulKind,
    Tier,
)

__all__ = ["AsyncClient", "Client", "ClientSettings", "route_of"]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_URL = "http://127.0.0.1:8000"
_MEMORIES = "/v1/users/{user_id}/memories"


def route(method: str, path: str) -> Callable[[F], F]:
    """Marks a client method with the API route it calls (a test checks every route of
    the OpenAPI document has one, in both clients)."""

    def mark(function: F) -> F:
        function.__memlane_route__ = (method, path)  # type: ignore[attr-defined]
        return function

    return mark


def route_of(method: Callable[..., Any]) -> tuple[str, str] | None:
    found = getattr(method, "__memlane_route__", None)
    return None if found is None else (str(found[0]), str(found[1]))


@dataclass(frozen=True)
class ClientSettings:
    """Where the API is and how to call it; arguments win over the environment."""

    base_url: str
    api_key: str | None
    timeout: float = 30.0
    retries: int = 3  # extra attempts after a 503
    backoff: float = 0.25  # seconds before the first retry; doubled each time

    @classmethod
    def resolve(
        cls,
        base_url: str | None,
        api_key: str | None,
        *,
        timeout: float,
        retries: int,
        backoff: float,
    ) -> ClientSettings:
        url = base_url or os.environ.get("MEMLANE_CLIENT_URL") or DEFAULT_URL
        key = api_key if api_key is not None else os.environ.get("MEMLANE_CLIENT_KEY") or None
        return cls(url.rstrip("/"), key, timeout, max(0, retries), max(0.0, backoff))

    def headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def delay(self, attempt: int) -> float:
        return float(self.backoff * (2**attempt))


@dataclass(frozen=True)
class _Call(Generic[T]):
    """One request and how its answer is read: built once, sent by either client."""

    method: str
    path: str
    read: Callable[[Any], T]
    json: Any = None
    params: dict[str, Any] = field(default_factory=dict)
    text: bool = False  # the answer is text (Prometheus, an export), not JSON
    content: bytes | None = None  # a raw body (an import)


def _path(template: str, **values: str) -> str:
    return template.format(**{k: quote(v, safe="") for k, v in values.items()})


def _model(kind: type[T]) -> Callable[[Any], T]:
    adapter = TypeAdapter(kind)
    return adapter.validate_python


def _nothing(_: Any) -> None:
    return None


def _as_dict(body: Any) -> dict[str, Any]:
    return dict(body)


def _transcript_body(transcript: TranscriptIn | Mapping[str, Any]) -> Any:
    # A mapping goes as it is, so the server reads the chat app's own format and counts
    # what it ignores; a TranscriptIn is already memlane's shape.
    if isinstance(transcript, TranscriptIn):
        return transcript.model_dump(mode="json", exclude_none=True)
    return dict(transcript)


class _Calls:
    """The requests of every route, shared by Client and AsyncClient."""

    @staticmethod
    def enqueue(transcript: TranscriptIn | Mapping[str, Any]) -> _Call[EnqueueResult]:
        body = _transcript_body(transcript)
        return _Call("POST", "/v1/transcripts", _model(EnqueueResult), json=body)

    @staticmethod
    def job(job_id: str) -> _Call[JobPublic]:
        return _Call("GET", _path("/v1/jobs/{id}", id=job_id), _model(JobPublic))

    @staticmethod
    def retry_job(job_id: str) -> _Call[JobPublic]:
        return _Call("POST", _path("/v1/jobs/{id}/retry", id=job_id), _model(JobPublic))

    @staticmethod
    def sweep_jobs() -> _Call[SweepOut]:
        return _Call("POST", "/v1/jobs/sweep", _model(SweepOut))

    @staticmethod
    def erase_user(user_id: str) -> _Call[ErasedOut]:
        path = _path("/v1/users/{user_id}", user_id=user_id)
        return _Call("DELETE", path, _model(ErasedOut))

    @staticmethod
    def lift_fingerprints(user_id: str) -> _Call[LiftedOut]:
        path = _path("/v1/users/{user_id}/fingerprints", user_id=user_id)
        return _Call("DELETE", path, _model(LiftedOut))

    @staticmethod
    def context(request: ContextRequest) -> _Call[ContextOut]:
        body = request.model_dump(mode="json", exclude_unset=True)
        return _Call("POST", "/v1/context", _model(ContextOut), json=body)

    @staticmethod
    def search(request: SearchRequest) -> _Call[list[SearchHit]]:
        body = request.model_dump(mode="json", exclude_unset=True)
        return _Call("POST", "/v1/search", _model(list[SearchHit]), json=body)

    @staticmethod
    def pack(pack_id: str) -> _Call[dict[str, Any]]:
        return _Call("GET", _path("/v1/packs/{id}", id=pack_id), _as_dict)

    @staticmethod
    def list_memories(
        user_id: str, status: str, limit: int, cursor: str | None
    ) -> _Call[MemoryPage]:
        params: dict[str, Any] = {"status": status, "limit": limit}
        if cursor:
            params["cursor"] = cursor
        path = _path(_MEMORIES, user_id=user_id)
        return _Call("GET", path, _model(MemoryPage), params=params)

    @staticmethod
    def add_memory(user_id: str, memory: MemoryCreate) -> _Call[MemoryPublic]:
        body = memory.model_dump(mode="json", exclude_unset=True)
        path = _path(_MEMORIES, user_id=user_id)
        return _Call("POST", path, _model(MemoryPublic), json=body)

    @staticmethod
    def get_memory(user_id: str, memory_id: str) -> _Call[MemoryPublic]:
        path = _path(_MEMORIES + "/{memory_id}", user_id=user_id, memory_id=memory_id)
        return _Call("GET", path, _model(MemoryPublic))

    @staticmethod
    def update_memory(user_id: str, memory_id: str, patch: MemoryPatch) -> _Call[MemoryPublic]:
        path = _path(_MEMORIES + "/{memory_id}", user_id=user_id, memory_id=memory_id)
        body = patch.model_dump(mode="json", exclude_unset=True)
        return _Call("PATCH", path, _model(MemoryPublic), json=body)

    @staticmethod
    def memory_history(user_id: str, memory_id: str) -> _Call[list[MemoryEvent]]:
        path = _path(_MEMORIES + "/{memory_id}/history", user_id=user_id, memory_id=memory_id)
        return _Call("GET", path, _model(list[MemoryEvent]))

    @staticmethod
    def forget(user_id: str, memory_id: str, purge: bool = False) -> _Call[None]:
        path = _path(_MEMORIES + "/{memory_id}", user_id=user_id, memory_id=memory_id)
        return _Call("DELETE", path, _nothing, params={"purge": "true"} if purge else {})

    @staticmethod
    def set_soul_block(user_id: str, kind: SoulKind, content: str) -> _Call[SoulBlock]:
        path = _path("/v1/users/{user_id}/soul/{kind}", user_id=user_id, kind=kind)
        body = SoulIn(content=content).model_dump(mode="json")
        return _Call("PUT", path, _model(SoulBlock), json=body)

    @staticmethod
    def soul_blocks(user_id: str) -> _Call[list[SoulBlock]]:
        path = _path("/v1/users/{user_id}/soul", user_id=user_id)
        return _Call("GET", path, _model(list[SoulBlock]))

    @staticmethod
    def add_procedure(user_id: str, name: str, content: str) -> _Call[Procedure]:
        path = _path("/v1/users/{user_id}/procedures", user_id=user_id)
        body = ProcedureIn(name=name, content=content).model_dump(mode="json")
        return _Call("POST", path, _model(Procedure), json=body)

    @staticmethod
    def procedures(user_id: str) -> _Call[list[Procedure]]:
        path = _path("/v1/users/{user_id}/procedures", user_id=user_id)
        return _Call("GET", path, _model(list[Procedure]))

    @staticmethod
    def export_user(user_id: str, messages: bool) -> _Call[str]:
        path = _path("/v1/users/{user_id}/export", user_id=user_id)
        params = {"messages": "true"} if messages else {}
        return _Call("GET", path, str, params=params, text=True)

    @staticmethod
    def import_user(user_id: str, data: str | bytes, merge: bool) -> _Call[ImportedOut]:
        path = _path("/v1/users/{user_id}/import", user_id=user_id)
        body = data.encode() if isinstance(data, str) else data
        params = {"merge": "true"} if merge else {}
        return _Call("POST", path, _model(ImportedOut), params=params, content=body)

    @staticmethod
    def delete_conversation(user_id: str, conversation_id: str) -> _Call[ConversationDeletedOut]:
        path = _path(
            "/v1/users/{user_id}/conversations/{conversation_id}",
            user_id=user_id,
            conversation_id=conversation_id,
        )
        return _Call("DELETE", path, _model(ConversationDeletedOut))

    @staticmethod
    def delete_soul_block(user_id: str, kind: SoulKind) -> _Call[None]:
        path = _path("/v1/users/{user_id}/soul/{kind}", user_id=user_id, kind=kind)
        return _Call("DELETE", path, _nothing)

    @staticmethod
    def delete_procedure(user_id: str, procedure: str) -> _Call[None]:
        path = _path(
            "/v1/users/{user_id}/procedures/{procedure}", user_id=user_id, procedure=procedure
        )
        return _Call("DELETE", path, _nothing)

    @staticmethod
    def metrics() -> _Call[str]:
        return _Call("GET", "/metrics", str, text=True)

    @staticmethod
    def health() -> _Call[dict[str, Any]]:
        return _Call("GET", "/healthz", _as_dict)

    @staticmethod
    def ready() -> _Call[dict[str, Any]]:
        return _Call("GET", "/readyz", _as_dict)

    @staticmethod
    def status() -> _Call[FleetStatus]:
        return _Call("GET", "/v1/status", _model(FleetStatus))


def _context_request(user_id: str, query: str | None, options: dict[str, Any]) -> ContextRequest:
    return ContextRequest(user_id=user_id, query=query, **options)


def _patch(fields: dict[str, Any], clear_expiry: bool) -> MemoryPatch:
    """Only the fields given go in the body; `clear_expiry` sends expires_at null."""
    given = {k: v for k, v in fields.items() if v is not None}
    if clear_expiry:
        if given.get("expires_at") is not None:
            raise ValueError("give expires_at or clear_expiry, not both")
        given["expires_at"] = None
    return MemoryPatch.model_validate(given)


def _memory(memory: MemoryCreate | str, fields: dict[str, Any]) -> MemoryCreate:
    if isinstance(memory, MemoryCreate):
        return memory.model_copy(update=fields) if fields else memory
    return MemoryCreate(content=memory, **fields)


def _read(call: _Call[T], response: httpx.Response) -> T:
    if response.status_code >= 400:
        raise error_from(response)
    if call.text:
        return call.read(response.text)
    return call.read(response.json() if response.content else None)


def _connection_failed(settings: ClientSettings, exc: httpx.TransportError) -> ConnectionFailed:
    return ConnectionFailed(
        f"cannot reach the memlane API at {settings.base_url} ({type(exc).__name__}: {exc}); "
        "check MEMLANE_CLIENT_URL"
    )


class Client:
    """The API over HTTP, synchronously. Close it (or use `with`) to free its connections."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.25,
    ) -> None:
        self.settings = ClientSettings.resolve(
            base_url, api_key, timeout=timeout, retries=retries, backoff=backoff
        )
        self._http = httpx.Client(
            base_url=self.settings.base_url,
            headers=self.settings.headers(),
            timeout=self.settings.timeout,
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, call: _Call[T]) -> T:
        for attempt in range(self.settings.retries + 1):
            try:
                response = self._http.request(
                    call.method,
                    call.path,
                    json=call.json,
                    content=call.content,
                    params=call.params or None,
                )
            except httpx.TransportError as exc:
                raise _connection_failed(self.settings, exc) from exc
            if response.status_code != 503 or attempt == self.settings.retries:
                break
            time.sleep(self.settings.delay(attempt))
        return _read(call, response)

    @route("POST", "/v1/transcripts")
    def enqueue(self, transcript: TranscriptIn | Mapping[str, Any]) -> EnqueueResult:
        """Store a transcript (memlane's shape, or OpenAI / Anthropic messages as they are)
        and queue its extraction jobs."""
        return self._send(_Calls.enqueue(transcript))

    @route("GET", "/v1/jobs/{job_id}")
    def job(self, job_id: str) -> JobPublic:
        return self._send(_Calls.job(job_id))

    @route("POST", "/v1/jobs/{job_id}/retry")
    def retry_job(self, job_id: str) -> JobPublic:
        return self._send(_Calls.retry_job(job_id))

    @route("POST", "/v1/jobs/sweep")
    def sweep_jobs(self) -> SweepOut:
        """Publish every queued job again, release stuck ones, start idle tails."""
        return self._send(_Calls.sweep_jobs())

    @route("DELETE", "/v1/users/{user_id}")
    def erase_user(self, user_id: str) -> ErasedOut:
        """Delete every row of the user, for good ("delete my data")."""
        return self._send(_Calls.erase_user(user_id))

    @route("DELETE", "/v1/users/{user_id}/fingerprints")
    def lift_fingerprints(self, user_id: str) -> LiftedOut:
        """Let the user's purged facts be learned again (their fingerprints deleted)."""
        return self._send(_Calls.lift_fingerprints(user_id))

    def wait(
        self, job_ids: list[str], *, timeout: float = 300.0, poll_s: float = 0.2
    ) -> dict[str, str]:
        """Poll the jobs until each is done or failed (or the timeout); their status."""
        deadline = time.monotonic() + timeout
        status: dict[str, str] = {job_id: self.job(job_id).status for job_id in job_ids}
        while time.monotonic() < deadline and not _settled(status):
            time.sleep(poll_s)
            status = {job_id: self.job(job_id).status for job_id in job_ids}
        return status

    @route("POST", "/v1/context")
    def context(self, user_id: str, query: str | None = None, **options: Any) -> ContextOut:
        """The context for the user's next model call; `options` are ContextRequest's
        fields (budget_tokens, strategy, context_window, style, format, …)."""
        return self._send(_Calls.context(_context_request(user_id, query, options)))

    @route("POST", "/v1/search")
    def search(self, user_id: str, query: str | None = None, **filters: Any) -> list[SearchHit]:
        """Memories for a query with their scores; `filters`: SearchRequest's fields
        (limit, category, tier, min_score, since, include_sensitive)."""
        request = SearchRequest(user_id=user_id, query=query, **filters)
        return self._send(_Calls.search(request))

    @route("GET", "/v1/packs/{pack_id}")
    def pack(self, pack_id: str) -> dict[str, Any]:
        return self._send(_Calls.pack(pack_id))

    @route("GET", _MEMORIES)
    def list_memories(
        self,
        user_id: str,
        *,
        status: MemoryStatus | Literal["all"] = "active",
        limit: int = 100,
        cursor: str | None = None,
    ) -> MemoryPage:
        """A page of the user's memories, newest first; pass its `next_cursor` as
        `cursor` for the next one (`iter_memories` follows them for you)."""
        return self._send(_Calls.list_memories(user_id, status, limit, cursor))

    def iter_memories(
        self,
        user_id: str,
        *,
        status: MemoryStatus | Literal["all"] = "active",
        page_size: int = 100,
    ) -> Iterator[MemoryPublic]:
        """Every memory of the user, newest first, a page per request."""
        cursor: str | None = None
        while True:
            page = self.list_memories(user_id, status=status, limit=page_size, cursor=cursor)
            yield from page.memories
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    @route("POST", _MEMORIES)
    def add_memory(self, user_id: str, memory: MemoryCreate | str, **fields: Any) -> MemoryPublic:
        return self._send(_Calls.add_memory(user_id, _memory(memory, fields)))

    @route("GET", _MEMORIES + "/{memory_id}")
    def get_memory(self, user_id: str, memory_id: str) -> MemoryPublic:
        return self._send(_Calls.get_memory(user_id, memory_id))

    @route("PATCH", _MEMORIES + "/{memory_id}")
    def update_memory(
        self,
        user_id: str,
        memory_id: str,
        *,
        content: str | None = None,
        category: Category | None = None,
        importance: float | None = None,
        confidence: float | None = None,
        expires_at: datetime | None = None,
        clear_expiry: bool = False,
        tier: Tier | None = None,
        status: Literal["active", "quarantined", "deleted"] | None = None,
        sensitive: bool | None = None,
    ) -> MemoryPublic:
        """Correct or curate a memory; None keeps a field (`clear_expiry` clears it)."""
        fields = dict(
            content=content,
            category=category,
            importance=importance,
            confidence=confidence,
            expires_at=expires_at,
            tier=tier,
            status=status,
            sensitive=sensitive,
        )
        patch = _patch(fields, clear_expiry)
        return self._send(_Calls.update_memory(user_id, memory_id, patch))

    @route("GET", _MEMORIES + "/{memory_id}/history")
    def memory_history(self, user_id: str, memory_id: str) -> list[MemoryEvent]:
        return self._send(_Calls.memory_history(user_id, memory_id))

    def pin(self, user_id: str, memory_id: str) -> MemoryPublic:
        return self.update_memory(user_id, memory_id, tier="pinned")

    @route("DELETE", _MEMORIES + "/{memory_id}")
    def forget(self, user_id: str, memory_id: str) -> None:
        self._send(_Calls.forget(user_id, memory_id))

    @route("DELETE", _MEMORIES + "/{memory_id}")
    def purge(self, user_id: str, memory_id: str) -> None:
        """Delete the memory for good (DELETE ?purge=true)."""
        self._send(_Calls.forget(user_id, memory_id, purge=True))

    @route("PUT", "/v1/users/{user_id}/soul/{kind}")
    def set_soul_block(self, user_id: str, kind: SoulKind, content: str) -> SoulBlock:
        return self._send(_Calls.set_soul_block(user_id, kind, content))

    @route("GET", "/v1/users/{user_id}/soul")
    def soul_blocks(self, user_id: str) -> list[SoulBlock]:
        return self._send(_Calls.soul_blocks(user_id))

    @route("POST", "/v1/users/{user_id}/procedures")
    def add_procedure(self, user_id: str, name: str, content: str) -> Procedure:
        return self._send(_Calls.add_procedure(user_id, name, content))

    @route("GET", "/v1/users/{user_id}/procedures")
    def procedures(self, user_id: str) -> list[Procedure]:
        return self._send(_Calls.procedures(user_id))

    @route("GET", "/v1/users/{user_id}/export")
    def export_user(self, user_id: str, *, messages: bool = False) -> str:
        """The user's data as JSON lines (for `import_user` of another deployment)."""
        return self._send(_Calls.export_user(user_id, messages))

    @route("POST", "/v1/users/{user_id}/import")
    def import_user(self, user_id: str, data: str | bytes, *, merge: bool = False) -> ImportedOut:
        """Import an export as this user; Conflict when the store holds some of its ids
        and not `merge`."""
        return self._send(_Calls.import_user(user_id, data, merge))

    @route("DELETE", "/v1/users/{user_id}/conversations/{conversation_id}")
    def delete_conversation(self, user_id: str, conversation_id: str) -> ConversationDeletedOut:
        """Delete a conversation and what was learned only from it."""
        return self._send(_Calls.delete_conversation(user_id, conversation_id))

    @route("DELETE", "/v1/users/{user_id}/soul/{kind}")
    def delete_soul_block(self, user_id: str, kind: SoulKind) -> None:
        self._send(_Calls.delete_soul_block(user_id, kind))

    @route("DELETE", "/v1/users/{user_id}/procedures/{procedure}")
    def delete_procedure(self, user_id: str, procedure: str) -> None:
        """Delete a procedure named by its id or its name."""
        self._send(_Calls.delete_procedure(user_id, procedure))

    @route("GET", "/metrics")
    def metrics(self) -> str:
        """The Prometheus exposition text of the server."""
        return self._send(_Calls.metrics())

    @route("GET", "/healthz")
    def health(self) -> dict[str, Any]:
        return self._send(_Calls.health())

    @route("GET", "/readyz")
    def ready(self) -> dict[str, Any]:
        """The readiness checks; raises Unavailable when still not ready after retries."""
        return self._send(_Calls.ready())

    @route("GET", "/v1/status")
    def status(self) -> FleetStatus:
        """Workers answering per queue and the queues' depths: ok or degraded."""
        return self._send(_Calls.status())


def _settled(status: Mapping[str, str]) -> bool:
    return all(value in {"done", "failed"} for value in status.values())


class AsyncClient:
    """The API over HTTP for asyncio; the same methods as Client, awaited."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.25,
    ) -> None:
        self.settings = ClientSettings.resolve(
            base_url, api_key, timeout=timeout, retries=retries, backoff=backoff
        )
        self._http = httpx.AsyncClient(
            base_url=self.settings.base_url,
            headers=self.settings.headers(),
            timeout=self.settings.timeout,
        )

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, call: _Call[T]) -> T:
        for attempt in range(self.settings.retries + 1):
            try:
                response = await self._http.request(
                    call.method,
                    call.path,
                    json=call.json,
                    content=call.content,
                    params=call.params or None,
                )
            except httpx.TransportError as exc:
                raise _connection_failed(self.settings, exc) from exc
            if response.status_code != 503 or attempt == self.settings.retries:
                break
            await asyncio.sleep(self.settings.delay(attempt))
        return _read(call, response)

    @route("POST", "/v1/transcripts")
    async def enqueue(self, transcript: TranscriptIn | Mapping[str, Any]) -> EnqueueResult:
        return await self._send(_Calls.enqueue(transcript))

    @route("GET", "/v1/jobs/{job_id}")
    async def job(self, job_id: str) -> JobPublic:
        return await self._send(_Calls.job(job_id))

    @route("POST", "/v1/jobs/{job_id}/retry")
    async def retry_job(self, job_id: str) -> JobPublic:
        return await self._send(_Calls.retry_job(job_id))

    @route("POST", "/v1/jobs/sweep")
    async def sweep_jobs(self) -> SweepOut:
        return await self._send(_Calls.sweep_jobs())

    @route("DELETE", "/v1/users/{user_id}")
    async def erase_user(self, user_id: str) -> ErasedOut:
        return await self._send(_Calls.erase_user(user_id))

    @route("DELETE", "/v1/users/{user_id}/fingerprints")
    async def lift_fingerprints(self, user_id: str) -> LiftedOut:
        return await self._send(_Calls.lift_fingerprints(user_id))

    async def wait(
        self, job_ids: list[str], *, timeout: float = 300.0, poll_s: float = 0.2
    ) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        status: dict[str, str] = {}
        for job_id in job_ids:
            status[job_id] = (await self.job(job_id)).status
        while time.monotonic() < deadline and not _settled(status):
            await asyncio.sleep(poll_s)
            status = {job_id: (await self.job(job_id)).status for job_id in job_ids}
        return status

    @route("POST", "/v1/context")
    async def context(self, user_id: str, query: str | None = None, **options: Any) -> ContextOut:
        return await self._send(_Calls.context(_context_request(user_id, query, options)))

    @route("POST", "/v1/search")
    async def search(
        self, user_id: str, query: str | None = None, **filters: Any
    ) -> list[SearchHit]:
        request = SearchRequest(user_id=user_id, query=query, **filters)
        return await self._send(_Calls.search(request))

    @route("GET", "/v1/packs/{pack_id}")
    async def pack(self, pack_id: str) -> dict[str, Any]:
        return await self._send(_Calls.pack(pack_id))

    @route("GET", _MEMORIES)
    async def list_memories(
        self,
        user_id: str,
        *,
        status: MemoryStatus | Literal["all"] = "active",
        limit: int = 100,
        cursor: str | None = None,
    ) -> MemoryPage:
        return await self._send(_Calls.list_memories(user_id, status, limit, cursor))

    async def iter_memories(
        self,
        user_id: str,
        *,
        status: MemoryStatus | Literal["all"] = "active",
        page_size: int = 100,
    ) -> AsyncIterator[MemoryPublic]:
        cursor: str | None = None
        while True:
            page = await self.list_memories(user_id, status=status, limit=page_size, cursor=cursor)
            for memory in page.memories:
                yield memory
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    @route("POST", _MEMORIES)
    async def add_memory(
        self, user_id: str, memory: MemoryCreate | str, **fields: Any
    ) -> MemoryPublic:
        return await self._send(_Calls.add_memory(user_id, _memory(memory, fields)))

    @route("GET", _MEMORIES + "/{memory_id}")
    async def get_memory(self, user_id: str, memory_id: str) -> MemoryPublic:
        return await self._send(_Calls.get_memory(user_id, memory_id))

    @route("PATCH", _MEMORIES + "/{memory_id}")
    async def update_memory(
        self,
        user_id: str,
        memory_id: str,
        *,
        content: str | None = None,
        category: Category | None = None,
        importance: float | None = None,
        confidence: float | None = None,
        expires_at: datetime | None = None,
        clear_expiry: bool = False,
        tier: Tier | None = None,
        status: Literal["active", "quarantined", "deleted"] | None = None,
        sensitive: bool | None = None,
    ) -> MemoryPublic:
        """Correct or curate a memory; None keeps a field (`clear_expiry` clears it)."""
        fields = dict(
            content=content,
            category=category,
            importance=importance,
            confidence=confidence,
            expires_at=expires_at,
            tier=tier,
            status=status,
            sensitive=sensitive,
        )
        patch = _patch(fields, clear_expiry)
        return await self._send(_Calls.update_memory(user_id, memory_id, patch))

    @route("GET", _MEMORIES + "/{memory_id}/history")
    async def memory_history(self, user_id: str, memory_id: str) -> list[MemoryEvent]:
        return await self._send(_Calls.memory_history(user_id, memory_id))

    async def pin(self, user_id: str, memory_id: str) -> MemoryPublic:
        return await self.update_memory(user_id, memory_id, tier="pinned")

    @route("DELETE", _MEMORIES + "/{memory_id}")
    async def forget(self, user_id: str, memory_id: str) -> None:
        await self._send(_Calls.forget(user_id, memory_id))

    @route("DELETE", _MEMORIES + "/{memory_id}")
    async def purge(self, user_id: str, memory_id: str) -> None:
        """Delete the memory for good (DELETE ?purge=true)."""
        await self._send(_Calls.forget(user_id, memory_id, purge=True))

    @route("PUT", "/v1/users/{user_id}/soul/{kind}")
    async def set_soul_block(self, user_id: str, kind: SoulKind, content: str) -> SoulBlock:
        return await self._send(_Calls.set_soul_block(user_id, kind, content))

    @route("GET", "/v1/users/{user_id}/soul")
    async def soul_blocks(self, user_id: str) -> list[SoulBlock]:
        return await self._send(_Calls.soul_blocks(user_id))

    @route("POST", "/v1/users/{user_id}/procedures")
    async def add_procedure(self, user_id: str, name: str, content: str) -> Procedure:
        return await self._send(_Calls.add_procedure(user_id, name, content))

    @route("GET", "/v1/users/{user_id}/procedures")
    async def procedures(self, user_id: str) -> list[Procedure]:
        return await self._send(_Calls.procedures(user_id))

    @route("GET", "/v1/users/{user_id}/export")
    async def export_user(self, user_id: str, *, messages: bool = False) -> str:
        """The user's data as JSON lines (for `import_user` of another deployment)."""
        return await self._send(_Calls.export_user(user_id, messages))

    @route("POST", "/v1/users/{user_id}/import")
    async def import_user(
        self, user_id: str, data: str | bytes, *, merge: bool = False
    ) -> ImportedOut:
        """Import an export as this user; Conflict when the store holds some of its ids
        and not `merge`."""
        return await self._send(_Calls.import_user(user_id, data, merge))

    @route("DELETE", "/v1/users/{user_id}/conversations/{conversation_id}")
    async def delete_conversation(
        self, user_id: str, conversation_id: str
    ) -> ConversationDeletedOut:
        """Delete a conversation and what was learned only from it."""
        return await self._send(_Calls.delete_conversation(user_id, conversation_id))

    @route("DELETE", "/v1/users/{user_id}/soul/{kind}")
    async def delete_soul_block(self, user_id: str, kind: SoulKind) -> None:
        await self._send(_Calls.delete_soul_block(user_id, kind))

    @route("DELETE", "/v1/users/{user_id}/procedures/{procedure}")
    async def delete_procedure(self, user_id: str, procedure: str) -> None:
        """Delete a procedure named by its id or its name."""
        await self._send(_Calls.delete_procedure(user_id, procedure))

    @route("GET", "/metrics")
    async def metrics(self) -> str:
        return await self._send(_Calls.metrics())

    @route("GET", "/healthz")
    async def health(self) -> dict[str, Any]:
        return await self._send(_Calls.health())

    @route("GET", "/readyz")
    async def ready(self) -> dict[str, Any]:
        return await self._send(_Calls.ready())

    @route("GET", "/v1/status")
    async def status(self) -> FleetStatus:
        return await self._send(_Calls.status())
