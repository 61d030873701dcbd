"""Pydantic schemas: everything that crosses a boundary (front doors, pipeline, store).

The pipeline works on these plain models; the store converts table rows to and from
them. Nothing here touches a database, the network or the clock.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

Role = Literal["user", "assistant", "system"]
Category = Literal["preference", "fact", "decision", "project"]
Tier = Literal["pinned", "verified", "candidate"]
MemoryStatus = Literal["active", "superseded", "quarantined", "deleted"]
JobStatus = Literal["queued", "running", "done", "failed"]
JobStage = Literal["extract", "store"]
SoulKind = Literal["identity", "style", "anti_patterns"]

CATEGORIES: tuple[Category, ...] = ("preference", "fact", "decision", "project")
TIERS: tuple[Tier, ...] = ("pinned", "verified", "candidate")
SOUL_KINDS: tuple[SoulKind, ...] = ("identity", "style", "anti_patterns")

Identifier = Annotated[str, StringConstraints(min_length=1, max_length=200, strip_whitespace=True)]
Score01 = Annotated[float, Field(ge=0.0, le=1.0)]

# A single message may be long (pasted logs), but not unbounded: the HTTP door and the
# facade share this limit so a 10 MB message is refused everywhere with the same words.
MAX_MESSAGE_CHARS = 100_000
MAX_MESSAGES_PER_TRANSCRIPT = 5_000


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --------------------------------------------------------------------------- transcripts


class MessageIn(Frozen):
    """One message of a transcript as a chat app sends it."""

    id: Identifier | None = None
    role: Role
    content: str
    created_at: datetime | None = None

    @field_validator("content")
    @classmethod
    def _content_is_text(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("content is empty")
        if "\x00" in value:
            raise ValueError("content contains a NUL byte")
        if len(value) > MAX_MESSAGE_CHARS:
            raise ValueError(
                f"content is {len(value):,} characters; the limit is {MAX_MESSAGE_CHARS:,}"
            )
        return value


class TranscriptIn(Frozen):
    """A conversation (or the newest part of one) handed to `enqueue`.

    Messages without ids are positional: the transcript is read as the conversation from
    its first message, so re-sending it, or a longer version of it, stores nothing twice.
    Messages with ids may be sent incrementally; an id seen before is skipped (its text
    must not change).
    """

    conversation_id: Identifier
    user_id: Identifier
    messages: list[MessageIn] = Field(min_length=1, max_length=MAX_MESSAGES_PER_TRANSCRIPT)
    final: bool = False

    @model_validator(mode="after")
    def _ids_are_consistent(self) -> TranscriptIn:
        with_ids = [m.id is not None for m in self.messages]
        if any(with_ids) and not all(with_ids):
            first = with_ids.index(False) if any(with_ids) else 0
            raise ValueError(
                f"messages.{first}.id is missing: give every message an id, or none of them"
            )
        seen: dict[str, int] = {}
        for index, message in enumerate(self.messages):
            if message.id is None:
                continue
            if message.id in seen:
                earlier = self.messages[seen[message.id]]
                if earlier.content != message.content or earlier.role != message.role:
                    raise ValueError(
                        f"messages.{index}.id {message.id!r} repeats messages.{seen[message.id]}"
                        " with different text"
                    )
            else:
                seen[message.id] = index
        return self


class StoredMessage(Frozen):
    """A message as the store keeps it: numbered within its conversation from 0."""

    conversation_id: str
    seq: int
    role: Role
    content: str
    created_at: datetime


# --------------------------------------------------------------------------- extraction


class ExtractedMemory(Frozen):
    """One memory the extractor proposes. One sentence; ranges validated."""

    content: Annotated[str, StringConstraints(min_length=1, max_length=1000, strip_whitespace=True)]
    category: Category
    importance: Score01
    confidence: Score01
    # The message (seq) the memory was read from, when the extractor knows it. Used to
    # tell a fact re-read from the same messages from a fresh confirmation.
    source_seq: int | None = None


class ExtractedEpisode(Frozen):
    summary: Annotated[str, StringConstraints(min_length=1, max_length=2000, strip_whitespace=True)]
    topics: list[str] = Field(default_factory=list, max_length=20)
    outcome: str | None = None


class Extraction(Frozen):
    memories: list[ExtractedMemory] = Field(default_factory=list, max_length=10)
    episode: ExtractedEpisode


class ExtractionWindow(Frozen):
    """What one extraction job reads: messages [start_seq, end_seq]; the part from
    new_from_seq on was never extracted before, the rest is context."""

    conversation_id: str
    user_id: str
    messages: list[StoredMessage]
    new_from_seq: int


# --------------------------------------------------------------------------- memories


class MemoryRecord(Frozen):
    """A stored memory as the pipeline sees it.

    created_at: when the stating message was said; confirmed_at: when it was last stated
    or confirmed (defaults to created_at); accessed_at: last stated, confirmed or shown in
    a context. `ref` is the user's short id of it (None for a record not yet stored).
    """

    id: str
    user_id: str
    content: str
    category: Category
    importance: Score01
    confidence: Score01
    tier: Tier = "candidate"
    status: MemoryStatus = "active"
    sensitive: bool = False
    expires_at: datetime | None = None
    keywords: frozenset[str] = frozenset()
    access_count: int = Field(default=1, ge=0)
    created_at: datetime
    confirmed_at: datetime
    accessed_at: datetime
    ref: int | None = None
    embedding: tuple[float, ...] | None = None
    source_conversation_id: str | None = None
    source_job_id: str | None = None
    # Highest message seq (in source_conversation_id) that has evidenced this memory.
    evidence_seq: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _confirmed_when_created(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("confirmed_at") is None and "created_at" in data:
            return {**data, "confirmed_at": data["created_at"]}
        return data


class MemoryCreate(Frozen):
    """A memory added by hand (API, CLI, facade)."""

    content: Annotated[str, StringConstraints(min_length=1, max_length=2000, strip_whitespace=True)]
    category: Category = "fact"
    importance: Score01 = 0.7
    confidence: Score01 = 1.0
    tier: Tier = "candidate"
    sensitive: bool = False
    expires_at: datetime | None = None


class MemoryPublic(Frozen):
    id: str
    user_id: str
    content: str
    category: Category
    importance: float
    confidence: float
    tier: Tier
    status: MemoryStatus
    sensitive: bool
    expires_at: datetime | None
    access_count: int
    created_at: datetime
    confirmed_at: datetime
    accessed_at: datetime
    ref: int
    source_conversation_id: str | None = None
    source_job_id: str | None = None


class EpisodeRecord(Frozen):
    id: str
    user_id: str
    conversation_id: str
    summary: str
    topics: list[str]
    outcome: str | None
    created_at: datetime  # when the last message it summarises was said
    ref: int | None = None
    keywords: frozenset[str] = frozenset()
    embedding: tuple[float, ...] | None = None


class SoulBlock(Frozen):
    user_id: str
    kind: SoulKind
    content: str
    updated_at: datetime


class Procedure(Frozen):
    id: str
    user_id: str
    name: str
    content: str
    keywords: frozenset[str] = frozenset()
    created_at: datetime
    ref: int | None = None


# --------------------------------------------------------------------------- jobs


class JobPublic(Frozen):
    id: str
    user_id: str
    conversation_id: str
    status: JobStatus
    stage: JobStage
    window_start_seq: int
    window_end_seq: int
    new_from_seq: int
    attempts: int
    last_error: str | None
    model: str | None
    tokens_in: int | None
    tokens_out: int | None
    cost_usd: float | None
    latency_ms: float | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None


class EnqueueResult(Frozen):
    conversation_id: str
    stored_messages: int
    skipped_messages: int
    job_ids: list[str]
