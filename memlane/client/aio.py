"""`AsyncClient`: memlane's API over HTTP with asyncio, the same methods as `Client`,
awaited (each route's request and answer are `memlane.client.calls`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

import httpx

from memlane.client.calls import (
    MEMORIES,
    Call,
    Calls,
    ClientSettings,
    T,
    connection_failed,
    context_request,
    memory_create,
    memory_patch,
    read_answer,
    route,
    settled,
)
from memlane.models.api_schemas import (
    ContextOut,
    ConversationDeletedOut,
    ErasedOut,
    ForgottenOut,
    ImportedOut,
    LiftedOut,
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
    WebhookEventType,
    WebhookPublic,
)
from memlane.pipeline.records import Category, MemoryStatus, Procedure, SoulBlock, SoulKind, Tier


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

    async def _send(self, call: Call[T]) -> T:
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
                raise connection_failed(self.settings, exc) from exc
            if response.status_code != 503 or attempt == self.settings.retries:
                break
            await asyncio.sleep(self.settings.delay(attempt))
        return read_answer(call, response)

    @route("POST", "/v1/transcripts")
    async def enqueue(self, transcript: TranscriptIn | Mapping[str, Any]) -> EnqueueResult:
        return await self._send(Calls.enqueue(transcript))

    @route("GET", "/v1/jobs/{job_id}")
    async def job(self, job_id: str) -> JobPublic:
        return await self._send(Calls.job(job_id))

    @route("POST", "/v1/jobs/{job_id}/retry")
    async def retry_job(self, job_id: str) -> JobPublic:
        return await self._send(Calls.retry_job(job_id))

    @route("POST", "/v1/jobs/sweep")
    async def sweep_jobs(self) -> SweepOut:
        return await self._send(Calls.sweep_jobs())

    @route("DELETE", "/v1/users/{user_id}")
    async def erase_user(self, user_id: str) -> ErasedOut:
        return await self._send(Calls.erase_user(user_id))

    @route("DELETE", "/v1/users/{user_id}/fingerprints")
    async def lift_fingerprints(self, user_id: str) -> LiftedOut:
        return await self._send(Calls.lift_fingerprints(user_id))

    @route("POST", "/v1/webhooks")
    async def add_webhook(
        self,
        url: str,
        events: Sequence[WebhookEventType],
        *,
        users: str | None = None,
        include_content: bool = False,
    ) -> WebhookCreated:
        """Subscribe `url` to events (an admin key); the answer's secret signs every
        delivery: keep it for `memlane.client.webhooks.verify`."""
        webhook = WebhookCreate(
            url=url, events=list(events), users=users, include_content=include_content
        )
        return await self._send(Calls.add_webhook(webhook))

    @route("GET", "/v1/webhooks")
    async def webhooks(self) -> list[WebhookPublic]:
        return await self._send(Calls.webhooks())

    @route("DELETE", "/v1/webhooks/{webhook_id}")
    async def remove_webhook(self, webhook_id: str) -> None:
        return await self._send(Calls.remove_webhook(webhook_id))

    @route("GET", "/v1/webhooks/deliveries")
    async def webhook_deliveries(
        self,
        *,
        status: DeliveryStatus | None = None,
        webhook_id: str | None = None,
        limit: int = 100,
    ) -> list[DeliveryPublic]:
        return await self._send(Calls.webhook_deliveries(status, webhook_id, limit))

    async def wait(
        self, job_ids: list[str], *, timeout: float = 300.0, poll_s: float = 0.2
    ) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        status: dict[str, str] = {}
        for job_id in job_ids:
            status[job_id] = (await self.job(job_id)).status
        while time.monotonic() < deadline and not settled(status):
            await asyncio.sleep(poll_s)
            status = {job_id: (await self.job(job_id)).status for job_id in job_ids}
        return status

    @route("POST", "/v1/context")
    async def context(self, user_id: str, query: str | None = None, **options: Any) -> ContextOut:
        return await self._send(Calls.context(context_request(user_id, query, options)))

    @route("POST", "/v1/search")
    async def search(
        self, user_id: str, query: str | None = None, **filters: Any
    ) -> list[SearchHit]:
        request = SearchRequest(user_id=user_id, query=query, **filters)
        return await self._send(Calls.search(request))

    @route("GET", "/v1/packs/{pack_id}")
    async def pack(self, pack_id: str) -> dict[str, Any]:
        return await self._send(Calls.pack(pack_id))

    @route("GET", MEMORIES)
    async def list_memories(
        self,
        user_id: str,
        *,
        status: MemoryStatus | Literal["all"] = "active",
        limit: int = 100,
        cursor: str | None = None,
        agent_id: str | None = None,
        filter: Mapping[str, Any] | None = None,  # the API's word
    ) -> MemoryPage:
        return await self._send(
            Calls.list_memories(user_id, status, limit, cursor, agent_id=agent_id, where=filter)
        )

    async def iter_memories(
        self,
        user_id: str,
        *,
        status: MemoryStatus | Literal["all"] = "active",
        page_size: int = 100,
        agent_id: str | None = None,
        filter: Mapping[str, Any] | None = None,  # the API's word
    ) -> AsyncIterator[MemoryPublic]:
        cursor: str | None = None
        while True:
            page = await self.list_memories(
                user_id,
                status=status,
                limit=page_size,
                cursor=cursor,
                agent_id=agent_id,
                filter=filter,
            )
            for memory in page.memories:
                yield memory
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    @route("POST", MEMORIES)
    async def add_memory(
        self, user_id: str, memory: MemoryCreate | str, **fields: Any
    ) -> MemoryPublic:
        return await self._send(Calls.add_memory(user_id, memory_create(memory, fields)))

    @route("GET", MEMORIES + "/{memory_id}")
    async def get_memory(self, user_id: str, memory_id: str) -> MemoryPublic:
        return await self._send(Calls.get_memory(user_id, memory_id))

    @route("POST", MEMORIES + "/forget")
    async def forget_matching(self, user_id: str, filter: Mapping[str, Any]) -> ForgottenOut:
        """Forget every active memory of the user whose metadata passes `filter`."""
        return await self._send(Calls.forget_matching(user_id, filter))

    @route("PATCH", MEMORIES + "/{memory_id}")
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
        patch = memory_patch(fields, clear_expiry)
        return await self._send(Calls.update_memory(user_id, memory_id, patch))

    @route("GET", MEMORIES + "/{memory_id}/history")
    async def memory_history(self, user_id: str, memory_id: str) -> list[MemoryEvent]:
        return await self._send(Calls.memory_history(user_id, memory_id))

    async def pin(self, user_id: str, memory_id: str) -> MemoryPublic:
        return await self.update_memory(user_id, memory_id, tier="pinned")

    @route("DELETE", MEMORIES + "/{memory_id}")
    async def forget(self, user_id: str, memory_id: str) -> None:
        await self._send(Calls.forget(user_id, memory_id))

    @route("DELETE", MEMORIES + "/{memory_id}")
    async def purge(self, user_id: str, memory_id: str) -> None:
        """Delete the memory for good (DELETE ?purge=true)."""
        await self._send(Calls.forget(user_id, memory_id, purge=True))

    @route("PUT", "/v1/users/{user_id}/soul/{kind}")
    async def set_soul_block(self, user_id: str, kind: SoulKind, content: str) -> SoulBlock:
        return await self._send(Calls.set_soul_block(user_id, kind, content))

    @route("GET", "/v1/users/{user_id}/soul")
    async def soul_blocks(self, user_id: str) -> list[SoulBlock]:
        return await self._send(Calls.soul_blocks(user_id))

    @route("POST", "/v1/users/{user_id}/procedures")
    async def add_procedure(self, user_id: str, name: str, content: str) -> Procedure:
        return await self._send(Calls.add_procedure(user_id, name, content))

    @route("GET", "/v1/users/{user_id}/procedures")
    async def procedures(self, user_id: str) -> list[Procedure]:
        return await self._send(Calls.procedures(user_id))

    @route("GET", "/v1/users/{user_id}/export")
    async def export_user(
        self, user_id: str, *, messages: bool = False, agent_id: str | None = None
    ) -> str:
        """The user's data as JSON lines (for `import_user` of another deployment);
        `agent_id`: what that agent sees (the shared data and its own), else every agent's."""
        return await self._send(Calls.export_user(user_id, messages, agent_id))

    @route("POST", "/v1/users/{user_id}/import")
    async def import_user(
        self, user_id: str, data: str | bytes, *, merge: bool = False
    ) -> ImportedOut:
        """Import an export as this user; Conflict when the store holds some of its ids
        and not `merge`."""
        return await self._send(Calls.import_user(user_id, data, merge))

    @route("DELETE", "/v1/users/{user_id}/conversations/{conversation_id}")
    async def delete_conversation(
        self, user_id: str, conversation_id: str
    ) -> ConversationDeletedOut:
        """Delete a conversation and what was learned only from it."""
        return await self._send(Calls.delete_conversation(user_id, conversation_id))

    @route("DELETE", "/v1/users/{user_id}/soul/{kind}")
    async def delete_soul_block(self, user_id: str, kind: SoulKind) -> None:
        await self._send(Calls.delete_soul_block(user_id, kind))

    @route("DELETE", "/v1/users/{user_id}/procedures/{procedure}")
    async def delete_procedure(self, user_id: str, procedure: str) -> None:
        """Delete a procedure named by its id or its name."""
        await self._send(Calls.delete_procedure(user_id, procedure))

    @route("GET", "/metrics")
    async def metrics(self) -> str:
        return await self._send(Calls.metrics())

    @route("GET", "/healthz")
    async def health(self) -> dict[str, Any]:
        return await self._send(Calls.health())

    @route("GET", "/readyz")
    async def ready(self) -> dict[str, Any]:
        return await self._send(Calls.ready())

    @route("GET", "/v1/status")
    async def status(self) -> FleetStatus:
        return await self._send(Calls.status())

    @route("GET", "/v1/keys")
    async def list_keys(self) -> list[KeyInfo]:
        """Every stored key (an admin key reaching every user): never a secret."""
        return await self._send(Calls.list_keys())

    @route("POST", "/v1/keys")
    async def create_key(self, name: str, **fields: Any) -> NewKey:
        """A new key, its secret in `key` (shown once); `fields`: KeyCreate's (scopes,
        users, expires_in_s, rate_per_s, burst)."""
        return await self._send(Calls.create_key(KeyCreate(name=name, **fields)))

    @route("POST", "/v1/keys/{name_or_id}/revoke")
    async def revoke_key(self, name_or_id: str) -> list[KeyInfo]:
        return await self._send(Calls.revoke_key(name_or_id))

    @route("POST", "/v1/keys/{name_or_id}/rotate")
    async def rotate_key(self, name_or_id: str, grace_s: int | None = None) -> NewKey:
        """A new secret; the old one valid `grace_s` more (default: the server's)."""
        return await self._send(Calls.rotate_key(name_or_id, grace_s))
