"""A typed HTTP client for memlane's API: `Client` (sync) and `AsyncClient` (asyncio), on
httpx. A chat app needs no database credentials, only the API's address and a key:

    from memlane.client import Client

    with Client("http://127.0.0.1:8000", api_key="...") as memlane:
        memlane.enqueue({"conversation_id": "c1", "user_id": "u1", "messages": messages})
        prompt = memlane.context("u1", "what does the user prefer?", budget_tokens=2000).context

The address and key come from the arguments, else from MEMLANE_CLIENT_URL and
MEMLANE_CLIENT_KEY (the server's keys are MEMLANE_API_KEYS: another variable, another
side). One method per route of the API, with the API's own request and answer models;
errors are the typed errors of `memlane.client_errors`. A 503 is retried with exponential
backoff, and nothing else: a 503 means the server did nothing (not ready, database down)
or, for a transcript whose broker was down, stored it and queued its jobs, which a
re-sent transcript does not store twice.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

import httpx
from pydantic import TypeAdapter

from memlane.api import (
    ContextOut,
    ContextRequest,
    ErasedOut,
    MemoryPatch,
    ProcedureIn,
    SoulIn,
    SweepOut,
)
from memlane.client_errors import ConnectionFailed, error_from
from memlane.models.schemas import (
    EnqueueResult,
    JobPublic,
    MemoryCreate,
    MemoryPublic,
    SearchHit,
    SearchRequest,
    TranscriptIn,
)
from memlane.pipeline.records import MemoryStatus, Procedure, SoulBlock, SoulKind, Tier

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
    text: bool = False  # the answer is text (Prometheus), not JSON


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
        user_id: str, status: str, limit: int, offset: int
    ) -> _Call[list[MemoryPublic]]:
        params = {"status": status, "limit": limit, "offset": offset}
        path = _path(_MEMORIES, user_id=user_id)
        return _Call("GET", path, _model(list[MemoryPublic]), params=params)

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
        body = patch.model_dump(mode="json", exclude_none=True)
        return _Call("PATCH", path, _model(MemoryPublic), json=body)

    @staticmethod
    def forget(user_id: str, memory_id: str) -> _Call[None]:
        path = _path(_MEMORIES + "/{memory_id}", user_id=user_id, memory_id=memory_id)
        return _Call("DELETE", path, _nothing)

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
    def metrics() -> _Call[str]:
        return _Call("GET", "/metrics", str, text=True)

    @staticmethod
    def health() -> _Call[dict[str, Any]]:
        return _Call("GET", "/healthz", _as_dict)

    @staticmethod
    def ready() -> _Call[dict[str, Any]]:
        return _Call("GET", "/readyz", _as_dict)


def _context_request(user_id: str, query: str | None, options: dict[str, Any]) -> ContextRequest:
    return ContextRequest(user_id=user_id, query=query, **options)


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
                    call.method, call.path, json=call.json, params=call.params or None
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
        offset: int = 0,
    ) -> list[MemoryPublic]:
        return self._send(_Calls.list_memories(user_id, status, limit, offset))

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
        tier: Tier | None = None,
        status: Literal["active", "quarantined", "deleted"] | None = None,
        sensitive: bool | None = None,
    ) -> MemoryPublic:
        patch = MemoryPatch(tier=tier, status=status, sensitive=sensitive)
        return self._send(_Calls.update_memory(user_id, memory_id, patch))

    def pin(self, user_id: str, memory_id: str) -> MemoryPublic:
        return self.update_memory(user_id, memory_id, tier="pinned")

    @route("DELETE", _MEMORIES + "/{memory_id}")
    def forget(self, user_id: str, memory_id: str) -> None:
        self._send(_Calls.forget(user_id, memory_id))

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
                    call.method, call.path, json=call.json, params=call.params or None
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
        offset: int = 0,
    ) -> list[MemoryPublic]:
        return await self._send(_Calls.list_memories(user_id, status, limit, offset))

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
        tier: Tier | None = None,
        status: Literal["active", "quarantined", "deleted"] | None = None,
        sensitive: bool | None = None,
    ) -> MemoryPublic:
        patch = MemoryPatch(tier=tier, status=status, sensitive=sensitive)
        return await self._send(_Calls.update_memory(user_id, memory_id, patch))

    async def pin(self, user_id: str, memory_id: str) -> MemoryPublic:
        return await self.update_memory(user_id, memory_id, tier="pinned")

    @route("DELETE", _MEMORIES + "/{memory_id}")
    async def forget(self, user_id: str, memory_id: str) -> None:
        await self._send(_Calls.forget(user_id, memory_id))

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

    @route("GET", "/metrics")
    async def metrics(self) -> str:
        return await self._send(_Calls.metrics())

    @route("GET", "/healthz")
    async def health(self) -> dict[str, Any]:
        return await self._send(_Calls.health())

    @route("GET", "/readyz")
    async def ready(self) -> dict[str, Any]:
        return await self._send(_Calls.ready())
