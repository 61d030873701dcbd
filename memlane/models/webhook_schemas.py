"""Wire schemas of webhooks: a subscription asked for, shown, and its deliveries."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from memlane.pipeline.records import Frozen

WebhookEventType = Literal[
    "job.done",
    "job.failed",
    "memory.created",
    "memory.updated",
    "memory.forgotten",
    "user.erased",
]
EVENT_TYPES: tuple[str, ...] = WebhookEventType.__args__  # type: ignore[attr-defined]
DeliveryStatus = Literal["pending", "delivered", "dead"]


class WebhookCreate(Frozen):
    """A subscription: `users` is a glob over user ids (`team-*`), none for every user;
    `include_content` adds a memory's text to memory events (read when sent)."""

    url: str = Field(min_length=1, max_length=2000)
    events: list[WebhookEventType] = Field(min_length=1)
    users: str | None = Field(default=None, min_length=1, max_length=200)
    include_content: bool = False

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http:// or https:// URL with a host")
        return value

    @field_validator("events")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(value))


class WebhookPublic(Frozen):
    id: str
    url: str
    events: list[WebhookEventType]
    users: str | None
    include_content: bool
    created_at: datetime


class WebhookCreated(WebhookPublic):
    """What adding a subscription answers: its secret, shown this once."""

    secret: str


class DeliveryPublic(Frozen):
    id: int
    webhook_id: str
    event_id: str
    event_type: WebhookEventType
    user_id: str | None
    occurred_at: datetime
    data: dict[str, Any]
    status: DeliveryStatus
    attempts: int
    next_attempt_at: datetime
    last_error: str | None
    response_status: int | None
    delivered_at: datetime | None
