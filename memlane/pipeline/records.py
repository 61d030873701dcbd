"""The records the domain's rules work on: messages as stored, what an extractor
proposes, and memories, episodes, procedures and soul blocks as the store keeps them.

Plain frozen pydantic models with no I/O; `memlane.models.schemas` keeps the wire schemas
(what crosses a front door) and the store converts table rows to and from these.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)

# `tool`: tool calls and tool results, kept as context and never read as the user's words.
Role = Literal["user", "assistant", "system", "tool"]
# Any category read from the store is a Category (a memory keeps one later removed from
# MEMLANE_CATEGORIES); which ones may be written is pipeline.categories' check.
Category = Annotated[str, StringConstraints(min_length=1, max_length=16)]
Tier = Literal["pinned", "verified", "candidate"]
MemoryStatus = Literal["active", "superseded", "quarantined", "deleted"]
SoulKind = Literal["identity", "style", "anti_patterns"]
# Whom a memory is about: the user (every agent of theirs sees it) or the agent the
# conversation is with (pipeline.scope).
About = Literal["user", "agent"]

TIERS: tuple[Tier, ...] = ("pinned", "verified", "candidate")
SOUL_KINDS: tuple[SoulKind, ...] = ("identity", "style", "anti_patterns")


def _a_number(value: Any) -> Any:
    # NaN compares false with everything: without this it is refused as "should be less
    # than or equal to 1", which sends the user looking for the wrong mistake.
    try:
        number = float(value) if isinstance(value, float | str) else None
    except ValueError:
        return value  # not a number at all: the float type says so
    if number is not None and not math.isfinite(number):
        raise ValueError(f"must be a number from 0 to 1, not {value!r}")
    return value


Score01 = Annotated[float, Field(ge=0.0, le=1.0), BeforeValidator(_a_number)]


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class StoredMessage(Frozen):
    """A message as the store keeps it: numbered within its conversation from 0."""

    conversation_id: str
    seq: int
    role: Role
    content: str
    created_at: datetime


class ExtractedMemory(Frozen):
    """One memory the extractor proposes. One sentence; ranges validated."""

    content: Annotated[str, StringConstraints(min_length=1, max_length=1000, strip_whitespace=True)]
    category: Category
    importance: Score01
    confidence: Score01
    # The message (seq) the memory was read from, when the extractor knows it. Used to
    # tell a fact re-read from the same messages from a fresh confirmation.
    source_seq: int | None = None
    # "agent": specific to the agent of the conversation; read only when it has one.
    about: About = "user"


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
    source_conversation_id: str | None = None
    source_job_id: str | None = None
    # Highest message seq (in source_conversation_id) that has evidenced this memory.
    evidence_seq: int | None = None
    embedding: tuple[float, ...] | None = None
    agent_id: str | None = None  # None: about the user; else that agent's alone
    # its conversations' (pipeline.metadata); the store's reads for an assembly, which
    # filter on it in SQL, leave it empty
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _confirmed_when_created(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("confirmed_at") is None and "created_at" in data:
            return {**data, "confirmed_at": data["created_at"]}
        return data


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
    agent_id: str | None = None  # the agent of its conversation; None: shared
    metadata: dict[str, Any] = Field(default_factory=dict)  # its conversation's


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
