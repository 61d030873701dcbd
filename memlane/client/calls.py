"""What the sync and the async client share: each route's request and how its answer is
read (`Calls`, one `Call` each), the settings (arguments, else MEMLANE_CLIENT_URL and
MEMLANE_CLIENT_KEY) and the retry rule, the marks that tie a method to its route, and the
reading of an answer into the API's models or its typed error. Only the send differs
(httpx sync in `memlane.client.sync`, async in `memlane.client.aio`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import TypeAdapter

from memlane.client.errors import ConnectionFailed, error_from
from memlane.models.api_schemas import (
    ContextOut,
    ContextRequest,
    ConversationDeletedOut,
    ErasedOut,
    ForgottenOut,
    ImportedOut,
    LiftedOut,
    ProcedureIn,
    SoulIn,
    SweepOut,
)
from memlane.models.key_schemas import KeyCreate, KeyInfo, NewKey
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
from memlane.models.webhook_schemas import (
    DeliveryPublic,
    DeliveryStatus,
    WebhookCreate,
    WebhookCreated,
    WebhookPublic,
)
from memlane.pipeline.records import Procedure, SoulBlock, SoulKind

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_URL = "http://127.0.0.1:8000"
MEMORIES = "/v1/users/{user_id}/memories"


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
class Call(Generic[T]):
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


class Calls:
    """The requests of every route, shared by Client and AsyncClient."""

    @staticmethod
    def enqueue(transcript: TranscriptIn | Mapping[str, Any]) -> Call[EnqueueResult]:
        body = _transcript_body(transcript)
        return Call("POST", "/v1/transcripts", _model(EnqueueResult), json=body)

    @staticmethod
    def job(job_id: str) -> Call[JobPublic]:
        return Call("GET", _path("/v1/jobs/{id}", id=job_id), _model(JobPublic))

    @staticmethod
    def retry_job(job_id: str) -> Call[JobPublic]:
        return Call("POST", _path("/v1/jobs/{id}/retry", id=job_id), _model(JobPublic))

    @staticmethod
    def sweep_jobs() -> Call[SweepOut]:
        return Call("POST", "/v1/jobs/sweep", _model(SweepOut))

    @staticmethod
    def erase_user(user_id: str) -> Call[ErasedOut]:
        path = _path("/v1/users/{user_id}", user_id=user_id)
        return Call("DELETE", path, _model(ErasedOut))

    @staticmethod
    def lift_fingerprints(user_id: str) -> Call[LiftedOut]:
        path = _path("/v1/users/{user_id}/fingerprints", user_id=user_id)
        return Call("DELETE", path, _model(LiftedOut))

    @staticmethod
    def context(request: ContextRequest) -> Call[ContextOut]:
        body = request.model_dump(mode="json", exclude_unset=True)
        return Call("POST", "/v1/context", _model(ContextOut), json=body)

    @staticmethod
    def search(request: SearchRequest) -> Call[list[SearchHit]]:
        body = request.model_dump(mode="json", exclude_unset=True)
        return Call("POST", "/v1/search", _model(list[SearchHit]), json=body)

    @staticmethod
    def pack(pack_id: str) -> Call[dict[str, Any]]:
        return Call("GET", _path("/v1/packs/{id}", id=pack_id), _as_dict)

    @staticmethod
    def list_memories(
        user_id: str,
        status: str,
        limit: int,
        cursor: str | None,
        agent_id: str | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> Call[MemoryPage]:
        params: dict[str, Any] = {"status": status, "limit": limit}
        if cursor:
            params["cursor"] = cursor
        if agent_id is not None:
            params["agent_id"] = agent_id
        if where is not None:
            params["filter"] = json.dumps(where)
        path = _path(MEMORIES, user_id=user_id)
        return Call("GET", path, _model(MemoryPage), params=params)

    @staticmethod
    def add_memory(user_id: str, memory: MemoryCreate) -> Call[MemoryPublic]:
        body = memory.model_dump(mode="json", exclude_unset=True)
        path = _path(MEMORIES, user_id=user_id)
        return Call("POST", path, _model(MemoryPublic), json=body)

    @staticmethod
    def get_memory(user_id: str, memory_id: str) -> Call[MemoryPublic]:
        path = _path(MEMORIES + "/{memory_id}", user_id=user_id, memory_id=memory_id)
        return Call("GET", path, _model(MemoryPublic))

    @staticmethod
    def forget_matching(user_id: str, where: Mapping[str, Any]) -> Call[ForgottenOut]:
        path = _path(MEMORIES + "/forget", user_id=user_id)
        return Call("POST", path, _model(ForgottenOut), json={"filter": dict(where)})

    @staticmethod
    def update_memory(user_id: str, memory_id: str, patch: MemoryPatch) -> Call[MemoryPublic]:
        path = _path(MEMORIES + "/{memory_id}", user_id=user_id, memory_id=memory_id)
        body = patch.model_dump(mode="json", exclude_unset=True)
        return Call("PATCH", path, _model(MemoryPublic), json=body)

    @staticmethod
    def memory_history(user_id: str, memory_id: str) -> Call[list[MemoryEvent]]:
        path = _path(MEMORIES + "/{memory_id}/history", user_id=user_id, memory_id=memory_id)
        return Call("GET", path, _model(list[MemoryEvent]))

    @staticmethod
    def forget(user_id: str, memory_id: str, purge: bool = False) -> Call[None]:
        path = _path(MEMORIES + "/{memory_id}", user_id=user_id, memory_id=memory_id)
        return Call("DELETE", path, _nothing, params={"purge": "true"} if purge else {})

    @staticmethod
    def set_soul_block(user_id: str, kind: SoulKind, content: str) -> Call[SoulBlock]:
        path = _path("/v1/users/{user_id}/soul/{kind}", user_id=user_id, kind=kind)
        body = SoulIn(content=content).model_dump(mode="json")
        return Call("PUT", path, _model(SoulBlock), json=body)

    @staticmethod
    def soul_blocks(user_id: str) -> Call[list[SoulBlock]]:
        path = _path("/v1/users/{user_id}/soul", user_id=user_id)
        return Call("GET", path, _model(list[SoulBlock]))

    @staticmethod
    def add_procedure(user_id: str, name: str, content: str) -> Call[Procedure]:
        path = _path("/v1/users/{user_id}/procedures", user_id=user_id)
        body = ProcedureIn(name=name, content=content).model_dump(mode="json")
        return Call("POST", path, _model(Procedure), json=body)

    @staticmethod
    def procedures(user_id: str) -> Call[list[Procedure]]:
        path = _path("/v1/users/{user_id}/procedures", user_id=user_id)
        return Call("GET", path, _model(list[Procedure]))

    @staticmethod
    def export_user(user_id: str, messages: bool, agent_id: str | None = None) -> Call[str]:
        path = _path("/v1/users/{user_id}/export", user_id=user_id)
        params = {"messages": "true"} if messages else {}
        if agent_id is not None:
            params["agent_id"] = agent_id
        return Call("GET", path, str, params=params, text=True)

    @staticmethod
    def import_user(user_id: str, data: str | bytes, merge: bool) -> Call[ImportedOut]:
        path = _path("/v1/users/{user_id}/import", user_id=user_id)
        body = data.encode() if isinstance(data, str) else data
        params = {"merge": "true"} if merge else {}
        return Call("POST", path, _model(ImportedOut), params=params, content=body)

    @staticmethod
    def delete_conversation(user_id: str, conversation_id: str) -> Call[ConversationDeletedOut]:
        path = _path(
            "/v1/users/{user_id}/conversations/{conversation_id}",
            user_id=user_id,
            conversation_id=conversation_id,
        )
        return Call("DELETE", path, _model(ConversationDeletedOut))

    @staticmethod
    def delete_soul_block(user_id: str, kind: SoulKind) -> Call[None]:
        path = _path("/v1/users/{user_id}/soul/{kind}", user_id=user_id, kind=kind)
        return Call("DELETE", path, _nothing)

    @staticmethod
    def delete_procedure(user_id: str, procedure: str) -> Call[None]:
        path = _path(
            "/v1/users/{user_id}/procedures/{procedure}", user_id=user_id, procedure=procedure
        )
        return Call("DELETE", path, _nothing)

    @staticmethod
    def add_webhook(webhook: WebhookCreate) -> Call[WebhookCreated]:
        body = webhook.model_dump(mode="json")
        return Call("POST", "/v1/webhooks", _model(WebhookCreated), json=body)

    @staticmethod
    def webhooks() -> Call[list[WebhookPublic]]:
        return Call("GET", "/v1/webhooks", _model(list[WebhookPublic]))

    @staticmethod
    def remove_webhook(webhook_id: str) -> Call[None]:
        return Call("DELETE", _path("/v1/webhooks/{id}", id=webhook_id), _nothing)

    @staticmethod
    def webhook_deliveries(
        status: DeliveryStatus | None, webhook_id: str | None, limit: int
    ) -> Call[list[DeliveryPublic]]:
        params: dict[str, Any] = {"limit": limit}
        if status is not None:
            params["status"] = status
        if webhook_id is not None:
            params["webhook_id"] = webhook_id
        path = "/v1/webhooks/deliveries"
        return Call("GET", path, _model(list[DeliveryPublic]), params=params)

    @staticmethod
    def metrics() -> Call[str]:
        return Call("GET", "/metrics", str, text=True)

    @staticmethod
    def health() -> Call[dict[str, Any]]:
        return Call("GET", "/healthz", _as_dict)

    @staticmethod
    def ready() -> Call[dict[str, Any]]:
        return Call("GET", "/readyz", _as_dict)

    @staticmethod
    def status() -> Call[FleetStatus]:
        return Call("GET", "/v1/status", _model(FleetStatus))

    @staticmethod
    def list_keys() -> Call[list[KeyInfo]]:
        return Call("GET", "/v1/keys", _model(list[KeyInfo]))

    @staticmethod
    def create_key(body: KeyCreate) -> Call[NewKey]:
        return Call("POST", "/v1/keys", _model(NewKey), json=body.model_dump(exclude_none=True))

    @staticmethod
    def revoke_key(name_or_id: str) -> Call[list[KeyInfo]]:
        path = _path("/v1/keys/{key}/revoke", key=name_or_id)
        return Call("POST", path, _model(list[KeyInfo]))

    @staticmethod
    def rotate_key(name_or_id: str, grace_s: int | None) -> Call[NewKey]:
        path = _path("/v1/keys/{key}/rotate", key=name_or_id)
        return Call("POST", path, _model(NewKey), json={"grace_s": grace_s})


def context_request(user_id: str, query: str | None, options: dict[str, Any]) -> ContextRequest:
    return ContextRequest(user_id=user_id, query=query, **options)


def memory_patch(fields: dict[str, Any], clear_expiry: bool) -> MemoryPatch:
    """Only the fields given go in the body; `clear_expiry` sends expires_at null."""
    given = {k: v for k, v in fields.items() if v is not None}
    if clear_expiry:
        if given.get("expires_at") is not None:
            raise ValueError("give expires_at or clear_expiry, not both")
        given["expires_at"] = None
    return MemoryPatch.model_validate(given)


def memory_create(memory: MemoryCreate | str, fields: dict[str, Any]) -> MemoryCreate:
    if isinstance(memory, MemoryCreate):
        return memory.model_copy(update=fields) if fields else memory
    return MemoryCreate(content=memory, **fields)


def read_answer(call: Call[T], response: httpx.Response) -> T:
    if response.status_code >= 400:
        raise error_from(response)
    if call.text:
        return call.read(response.text)
    return call.read(response.json() if response.content else None)


def connection_failed(settings: ClientSettings, exc: httpx.TransportError) -> ConnectionFailed:
    return ConnectionFailed(
        f"cannot reach the memlane API at {settings.base_url} ({type(exc).__name__}: {exc}); "
        "check MEMLANE_CLIENT_URL"
    )


def settled(status: Mapping[str, str]) -> bool:
    return all(value in {"done", "failed"} for value in status.values())
