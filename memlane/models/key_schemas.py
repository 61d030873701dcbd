"""API keys as they cross a boundary: a key's public record (never its secret or hash),
a new key with its secret shown once, and what POST /v1/keys takes."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

KeyState = Literal["active", "expired", "revoked"]


class KeyInfo(BaseModel):
    """A stored key: what it may do and its lifetime; `state` as of the answer."""

    id: str = Field(description="the key's public part (`mlk_<id>_…`)")
    name: str
    scopes: list[str]
    users: list[str] = Field(description="user patterns; empty = every user")
    rate_per_s: float | None = Field(description="null = the server's MEMLANE_KEY_RATE_PER_S")
    burst: int | None = Field(description="null = the server's MEMLANE_KEY_BURST")
    created_at: datetime
    expires_at: datetime | None
    last_used_at: datetime | None = Field(description="to within a minute")
    revoked_at: datetime | None
    state: KeyState


class NewKey(BaseModel):
    """A key just made: `key` is shown this once and stored only as a hash."""

    key: str
    info: KeyInfo


class KeyCreate(BaseModel):
    name: str = Field(min_length=1, max_length=60)
    scopes: list[str] = Field(default_factory=lambda: ["read", "write"])
    users: list[str] = Field(default_factory=list, description="empty = every user")
    expires_in_s: int | None = Field(None, ge=60, description="null = never expires")
    rate_per_s: float | None = Field(None, ge=0, description="0 = unlimited")
    burst: int | None = Field(None, ge=1)


class KeyRotate(BaseModel):
    grace_s: int | None = Field(
        None,
        ge=0,
        description="how long the old key stays valid; null = MEMLANE_KEY_ROTATION_GRACE_S",
    )
