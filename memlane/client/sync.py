"""`Client`: memlane's API over HTTP, synchronously (each route's request and answer are
`memlane.client.calls`)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
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

    def _send(self, call: Call[T]) -> T:
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
                raise connection_failed(self.settings, exc) from exc
            if response.status_code != 503 or attempt == self.settings.retries:
                break
            time.sleep(self.settings.delay(attempt))
        return read_answer(call, response)

    @route("POST", "/v1/transcripts")
    def enqueue(self, transcript: TranscriptIn | Mapping[str, Any]) -> EnqueueResult:
        """Store a transcript (memlane's shape, or OpenAI / Anthropic messages as they are)
        and queue its extraction jobs."""
        return self._send(Calls.enqueue(transcript))

    @route("GET", "/v1/jobs/{job_id}")
    def job(self, job_id: str) -> JobPublic:
        return self._send(Calls.job(job_id))

    @route("POST", "/v1/jobs/{job_id}/retry")
    def retry_job(self, job_id: str) -> JobPublic:
        return self._send(Calls.retry_job(job_id))

    @route("POST", "/v1/jobs/sweep")
    def sweep_jobs(self) -> SweepOut:
        """Publish every queued job again, release stuck ones, start idle tails."""
        return self._send(Calls.sweep_jobs())

    @route("DELETE", "/v1/users/{user_id}")
    def erase_user(self, user_id: str) -> ErasedOut:
        """Delete every row of the user, for good ("delete my data")."""
        return self._send(Calls.erase_user(user_id))

    @route("DELETE", "/v1/users/{user_id}/fingerprints")
    def lift_fingerprints(self, user_id: str) -> LiftedOut:
        """Let the user's purged facts be learned again (their fingerprints deleted)."""
        return self._send(Calls.lift_fingerprints(user_id))

    @route("POST", "/v1/webhooks")
    def add_webhook(
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
        return self._send(Calls.add_webhook(webhook))

    @route("GET", "/v1/webhooks")
    def webhooks(self) -> list[WebhookPublic]:
        return self._send(Calls.webhooks())

    @route("DELETE", "/v1/webhooks/{webhook_id}")
    def remove_webhook(self, webhook_id: str) -> None:
        return self._send(Calls.remove_webhook(webhook_id))

    @route("GET", "/v1/webhooks/deliveries")
    def webhook_deliveries(
        self,
        *,
        status: DeliveryStatus | None = None,
        webhook_id: str | None = None,
        limit: int = 100,
    ) -> list[DeliveryPublic]:
        return self._send(Calls.webhook_deliveries(status, webhook_id, limit))

    def wait(
        self, job_ids: list[str], *, timeout: float = 300.0, poll_s: float = 0.2
    ) -> dict[str, str]:
        """Poll the jobs until each is done or failed (or the timeout); their status."""
        deadline = time.monotonic() + timeout
        status: dict[str, str] = {job_id: self.job(job_id).status for job_id in job_ids}
        while time.monotonic() < deadline and not settled(status):
            time.sleep(poll_s)
            status = {job_id: self.job(job_id).status for job_id in job_ids}
        return status

    @route("POST", "/v1/context")
    def context(self, user_id: str, query: str | None = None, **options: Any) -> ContextOut:
        """The context for the user's next model call; `options` are ContextRequest's
        fields (budget_tokens, strategy, context_window, style, format, …)."""
        return self._send(Calls.context(context_request(user_id, query, options)))

    @route("POST", "/v1/search")
    def search(self, user_id: str, query: str | None = None, **filters: Any) -> list[SearchHit]:
        """Memories for a query with their scores; `filters`: SearchRequest's fields
        (limit, category, tier, min_score, since, include_sensitive, agent_id)."""
        request = SearchRequest(user_id=user_id, query=query, **filters)
        return self._send(Calls.search(request))

    @route("GET", "/v1/packs/{pack_id}")
    def pack(self, pack_id: str) -> dict[str, Any]:
        return self._send(Calls.pack(pack_id))

    @route("GET", MEMORIES)
    def list_memories(
        self,
        user_id: str,
        *,
        status: MemoryStatus | Literal["all"] = "active",
        limit: int = 100,
        cursor: str | None = None,
        agent_id: str | None = None,
        filter: Mapping[str, Any] | None = None,  # the API's word
    ) -> MemoryPage:
        """A page of the user's memories, newest first; pass its `next_cursor` as
        `cursor` for the next one (`iter_memories` follows them for you). `agent_id`: the
        shared memories and that agent's; without, the shared ones. `filter`: those whose
        metadata passes it."""
        return self._send(
            Calls.list_memories(user_id, status, limit, cursor, agent_id=agent_id, where=filter)
        )

    def iter_memories(
        self,
        user_id: str,
        *,
        status: MemoryStatus | Literal["all"] = "active",
        page_size: int = 100,
        agent_id: str | None = None,
        filter: Mapping[str, Any] | None = None,  # the API's word
    ) -> Iterator[MemoryPublic]:
        """Every memory of the user, newest first, a page per request."""
        cursor: str | None = None
        while True:
            page = self.list_memories(
                user_id,
                status=status,
                limit=page_size,
                cursor=cursor,
                agent_id=agent_id,
                filter=filter,
            )
            yield from page.memories
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    @route("POST", MEMORIES)
    def add_memory(self, user_id: str, memory: MemoryCreate | str, **fields: Any) -> MemoryPublic:
        return self._send(Calls.add_memory(user_id, memory_create(memory, fields)))

    @route("GET", MEMORIES + "/{memory_id}")
    def get_memory(self, user_id: str, memory_id: str) -> MemoryPublic:
        return self._send(Calls.get_memory(user_id, memory_id))

    @route("POST", MEMORIES + "/forget")
    def forget_matching(self, user_id: str, filter: Mapping[str, Any]) -> ForgottenOut:
        """Forget every active memory of the user whose metadata passes `filter`."""
        return self._send(Calls.forget_matching(user_id, filter))

    @route("PATCH", MEMORIES + "/{memory_id}")
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
        patch = memory_patch(fields, clear_expiry)
        return self._send(Calls.update_memory(user_id, memory_id, patch))

    @route("GET", MEMORIES + "/{memory_id}/history")
    def memory_history(self, user_id: str, memory_id: str) -> list[MemoryEvent]:
        return self._send(Calls.memory_history(user_id, memory_id))

    def pin(self, user_id: str, memory_id: str) -> MemoryPublic:
        return self.update_memory(user_id, memory_id, tier="pinned")

    @route("DELETE", MEMORIES + "/{memory_id}")
    def forget(self, user_id: str, memory_id: str) -> None:
        self._send(Calls.forget(user_id, memory_id))

    @route("DELETE", MEMORIES + "/{memory_id}")
    def purge(self, user_id: str, memory_id: str) -> None:
        """Delete the memory for good (DELETE ?purge=true)."""
        self._send(Calls.forget(user_id, memory_id, purge=True))

    @route("PUT", "/v1/users/{user_id}/soul/{kind}")
    def set_soul_block(self, user_id: str, kind: SoulKind, content: str) -> SoulBlock:
        return self._send(Calls.set_soul_block(user_id, kind, content))

    @route("GET", "/v1/users/{user_id}/soul")
    def soul_blocks(self, user_id: str) -> list[SoulBlock]:
        return self._send(Calls.soul_blocks(user_id))

    @route("POST", "/v1/users/{user_id}/procedures")
    def add_procedure(self, user_id: str, name: str, content: str) -> Procedure:
        return self._send(Calls.add_procedure(user_id, name, content))

    @route("GET", "/v1/users/{user_id}/procedures")
    def procedures(self, user_id: str) -> list[Procedure]:
        return self._send(Calls.procedures(user_id))

    @route("GET", "/v1/users/{user_id}/export")
    def export_user(
        self, user_id: str, *, messages: bool = False, agent_id: str | None = None
    ) -> str:
        """The user's data as JSON lines (for `import_user` of another deployment);
        `agent_id`: what that agent sees (the shared data and its own), else every agent's."""
        return self._send(Calls.export_user(user_id, messages, agent_id))

    @route("POST", "/v1/users/{user_id}/import")
    def import_user(self, user_id: str, data: str | bytes, *, merge: bool = False) -> ImportedOut:
        """Import an export as this user; Conflict when the store holds some of its ids
        and not `merge`."""
        return self._send(Calls.import_user(user_id, data, merge))

    @route("DELETE", "/v1/users/{user_id}/conversations/{conversation_id}")
    def delete_conversation(self, user_id: str, conversation_id: str) -> ConversationDeletedOut:
        """Delete a conversation and what was learned only from it."""
        return self._send(Calls.delete_conversation(user_id, conversation_id))

    @route("DELETE", "/v1/users/{user_id}/soul/{kind}")
    def delete_soul_block(self, user_id: str, kind: SoulKind) -> None:
        self._send(Calls.delete_soul_block(user_id, kind))

    @route("DELETE", "/v1/users/{user_id}/procedures/{procedure}")
    def delete_procedure(self, user_id: str, procedure: str) -> None:
        """Delete a procedure named by its id or its name."""
        self._send(Calls.delete_procedure(user_id, procedure))

    @route("GET", "/metrics")
    def metrics(self) -> str:
        """The Prometheus exposition text of the server."""
        return self._send(Calls.metrics())

    @route("GET", "/healthz")
    def health(self) -> dict[str, Any]:
        return self._send(Calls.health())

    @route("GET", "/readyz")
    def ready(self) -> dict[str, Any]:
        """The readiness checks; raises Unavailable when still not ready after retries."""
        return self._send(Calls.ready())

    @route("GET", "/v1/status")
    def status(self) -> FleetStatus:
        """Workers answering per queue and the queues' depths: ok or degraded."""
        return self._send(Calls.status())

    @route("GET", "/v1/keys")
    def list_keys(self) -> list[KeyInfo]:
        """Every stored key (an admin key reaching every user): never a secret."""
        return self._send(Calls.list_keys())

    @route("POST", "/v1/keys")
    def create_key(self, name: str, **fields: Any) -> NewKey:
        """A new key, its secret in `key` (shown once); `fields`: KeyCreate's (scopes,
        users, expires_in_s, rate_per_s, burst)."""
        return self._send(Calls.create_key(KeyCreate(name=name, **fields)))

    @route("POST", "/v1/keys/{name_or_id}/revoke")
    def revoke_key(self, name_or_id: str) -> list[KeyInfo]:
        return self._send(Calls.revoke_key(name_or_id))

    @route("POST", "/v1/keys/{name_or_id}/rotate")
    def rotate_key(self, name_or_id: str, grace_s: int | None = None) -> NewKey:
        """A new secret; the old one valid `grace_s` more (default: the server's)."""
        return self._send(Calls.rotate_key(name_or_id, grace_s))
