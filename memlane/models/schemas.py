"""Wire schemas: what crosses a front door (transcripts in, memories, jobs and enqueue
results out). The domain's records (memories, episodes, …) live in
`memlane.pipeline.records`; nothing here touches a database, the network or the clock.
Over 400 lines: a family per entity (create, edit, public) and the shared field types
(identifiers, stored text) they build on, read together when a door changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    StringConstraints,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from memlane.pipeline.extraction.chat_formats import (
    ChatFormat,
    Flavor,
    check_format,
    read_message,
    read_system,
    system_message,
)
from memlane.pipeline.metadata.filters import parse_filter
from memlane.pipeline.metadata.values import MetadataError, check_metadata
from memlane.pipeline.records import (
    Category,
    Frozen,
    MemoryStatus,
    Role,
    Score01,
    Tier,
)

JobStatus = Literal["queued", "running", "done", "failed"]
JobStage = Literal["extract", "store"]


def storable_text(value: str) -> str:
    """`value` if both backends can store it: no NUL character (PostgreSQL refuses it in
    text) and no lone surrogate (legal in JSON, not encodable as UTF-8)."""
    if "\x00" in value:
        raise ValueError("contains a NUL character (\\u0000), which text cannot hold")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(value[exc.start])
        raise ValueError(f"contains a lone surrogate (\\u{code:04x}), which is not text") from None
    return value


def user_id_rule(value: str) -> str:
    """A user id also names a path of the HTTP API (/v1/users/{user}/…): no '/'."""
    if "/" in value:
        raise ValueError("contains '/', which a user id cannot (it is part of URL paths)")
    return value


def as_utc(value: datetime | None) -> datetime | None:
    """A time without a zone is read as UTC (what most chat apps send)."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


StoredText = Annotated[str, AfterValidator(storable_text)]


def _storable_before(value: Any) -> Any:
    # Before the constraints: stripping whitespace cannot take a lone surrogate, and
    # would name it "unable to parse raw data as a unicode string".
    return storable_text(value) if isinstance(value, str) else value


Identifier = Annotated[
    str,
    StringConstraints(min_length=1, max_length=200, strip_whitespace=True),
    BeforeValidator(_storable_before),
]
UserIdIn = Annotated[Identifier, AfterValidator(user_id_rule)]
UtcTime = Annotated[datetime, AfterValidator(as_utc)]

# A single message may be long (pasted logs), but not unbounded: the HTTP door and the
# facade share this limit so a 10 MB message is refused everywhere with the same words.
MAX_MESSAGE_CHARS = 100_000
MAX_MESSAGES_PER_TRANSCRIPT = 5_000


# --------------------------------------------------------------------------- transcripts


_ROLE_SCHEMA: dict[str, Any] = {
    "type": "string",
    "enum": ["user", "assistant", "system", "developer", "tool", "function"],
}
_PART_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"type": {"type": "string"}, "text": {"type": "string"}},
    "required": ["type"],
    "description": "An OpenAI or Anthropic content part (text, image_url, image, file, "
    "document, input_audio, tool_use, tool_result, thinking, refusal).",
}
_CONTENT_SCHEMA: dict[str, Any] = {
    "anyOf": [{"type": "string"}, {"type": "array", "items": _PART_SCHEMA}, {"type": "null"}],
    "description": "Text, or a list of content parts; null beside tool_calls, refusal "
    "or audio (an OpenAI assistant message).",
}
_TOOL_CALLS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "items": {"type": "object", "description": "An OpenAI tool call: {id, type, function}."},
}


def _read_fields(schema: dict[str, Any]) -> None:
    # Fields the reader takes (folded into role and content, never kept as fields).
    schema["properties"].update(
        name={"type": "string"},
        tool_calls=_TOOL_CALLS_SCHEMA,
        tool_call_id={"type": "string"},
        refusal={
            "anyOf": [{"type": "string"}, {"type": "null"}],
            "description": "An OpenAI refusal: read as what the assistant said.",
        },
    )


class MessageIn(Frozen):
    """One message of a transcript as a chat app sends it: memlane's plain shape, or an
    OpenAI chat / Anthropic messages message as it is (content parts, tool calls, tool
    results, `developer`, `name`), read by `memlane.pipeline.extraction.chat_formats`. Fields no
    format knows are ignored and counted in `ignored_fields`."""

    # Unknown fields are ignored (and counted) by the reader before validation; the
    # schema says so, and shows the shapes the reader takes for role and content.
    model_config = ConfigDict(frozen=True, extra="ignore", json_schema_extra=_read_fields)

    id: Identifier | None = None
    role: Annotated[Role, WithJsonSchema(_ROLE_SCHEMA)]
    content: Annotated[str, WithJsonSchema(_CONTENT_SCHEMA)]
    created_at: UtcTime | None = None

    _ignored: tuple[str, ...] = PrivateAttr(default=())
    _flavor: Flavor | None = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _read_chat_format(
        cls, data: Any, handler: ModelWrapValidatorHandler[MessageIn]
    ) -> MessageIn:
        if not isinstance(data, Mapping):
            return handler(data)
        read = read_message(data)
        message = handler(read.data)
        message._ignored = read.ignored
        message._flavor = read.flavor
        return message

    @property
    def ignored_fields(self) -> tuple[str, ...]:
        """What was not read: `field:NAME` for unknown fields, `part:TYPE` for parts."""
        return self._ignored

    @field_validator("content")
    @classmethod
    def _content_is_text(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("content is empty")
        storable_text(value)
        if len(value) > MAX_MESSAGE_CHARS:
            raise ValueError(
                f"content is {len(value):,} characters; the limit is {MAX_MESSAGE_CHARS:,}"
            )
        return value


def _checked_metadata(value: Any) -> Any:
    try:
        return check_metadata(value)
    except MetadataError as exc:
        where = ".".join(str(part) for part in exc.path)
        raise ValueError(f"at {where}: {exc.reason}" if where else exc.reason) from None


MetadataIn = Annotated[
    dict[str, Any],
    BeforeValidator(_checked_metadata),
    Field(
        description="A JSON object (at most 64 keys, 8 KB): string keys, each a string, "
        "number, boolean or a list of them; what is learned keeps it, and reads filter on "
        "it (docs/metadata.md)",
    ),
]


def _checked_filter(value: Any) -> Any:
    try:
        parse_filter(value)
    except MetadataError as exc:
        where = ".".join(str(part) for part in exc.path)
        raise ValueError(f"at {where}: {exc.reason}" if where else exc.reason) from None
    return value


FilterIn = Annotated[
    dict[str, Any] | None,
    BeforeValidator(_checked_filter),
    Field(
        description='a metadata filter (docs/metadata.md), e.g. {"team": "eng"} or '
        '{"score": {"gte": 3}}: only memories whose metadata passes it; a malformed one '
        "is a 422 naming the bad part",
    ),
]


class TranscriptIn(Frozen):
    """A conversation (or the newest part of one) handed to `enqueue`.

    Messages without ids are positional: the transcript is read as the conversation from
    its first message, so re-sending it, or a longer version of it, stores nothing twice.
    Messages with ids may be sent incrementally; an id seen before is skipped (its text
    must not change).

    `system` is Anthropic's top-level system prompt (a string or text blocks): it is read
    into `messages` as their first message, role system, so `messages` hold the whole
    conversation and `system` (kept as given) is never sent or stored twice.
    """

    conversation_id: Identifier
    user_id: UserIdIn
    agent_id: UserIdIn | None = Field(
        default=None,
        description="The agent (assistant) the user talks to in this conversation, when the "
        "app has several: memories about the user are shared by all of them, memories "
        "specific to this agent are its alone. A conversation keeps the agent it was "
        "first sent with",
    )
    system: str | list[dict[str, Any]] | None = Field(
        default=None,
        exclude=True,
        description="Anthropic's top-level system prompt, a string or a list of text "
        "blocks (cache_control allowed): stored as the conversation's first message, "
        "role system",
    )
    messages: list[MessageIn] = Field(min_length=1, max_length=MAX_MESSAGES_PER_TRANSCRIPT)
    final: bool = False
    # Which provider's message shapes to expect; "auto" reads either (not both at once).
    format: ChatFormat = "auto"
    language: str | None = Field(
        default=None,
        pattern=r"^[a-z]{2,3}$",
        description="The messages' language (ISO 639-1, e.g. de) when the app knows it; "
        "otherwise each message's is detected from its text",
    )
    # the conversation's: a key sent again replaces the stored value, others are kept
    metadata: MetadataIn = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _known_fields(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        unknown = [str(key) for key in data if key not in cls.model_fields]
        if unknown:
            names = ", ".join(repr(name) for name in unknown)
            raise ValueError(
                f"unknown field{'s' if len(unknown) > 1 else ''} {names}: a transcript "
                f"takes {', '.join(cls.model_fields)}"
            )
        return data

    @field_validator("system", mode="before")
    @classmethod
    def _system_is_readable(cls, value: Any) -> Any:
        if value is not None:
            read_system(value)  # its ValueError is named `system`
        return value

    @property
    def ignored_fields(self) -> dict[str, int]:
        """How many times each unknown message field (or part type) was ignored."""
        counts: dict[str, int] = {}
        for message in self.messages:
            for name in message.ignored_fields:
                counts[name] = counts.get(name, 0) + 1
        return counts

    @model_validator(mode="after")
    def _one_format(self) -> TranscriptIn:
        check_format([m._flavor for m in self.messages], self.format)
        return self

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

    @model_validator(mode="after")
    def _system_first(self) -> TranscriptIn:
        # After the messages were read, so their errors keep the indices the caller sent.
        if self.system is None:
            return self
        first = self.messages[0]
        raw = system_message(
            self.system, first=(first.role, first.content), with_ids=first.id is not None
        )
        if raw is None:
            return self
        try:
            message = MessageIn.model_validate(raw)
        except ValidationError as exc:
            problem = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
            raise ValueError(f"system: {problem}") from None
        # frozen: set once, here, while the model is being built
        object.__setattr__(self, "messages", [message, *self.messages])
        return self


# --------------------------------------------------------------------------- extraction


# --------------------------------------------------------------------------- memories


MemoryContent = Annotated[
    str,
    StringConstraints(min_length=1, max_length=2000, strip_whitespace=True),
    AfterValidator(storable_text),
]


CONFIGURED_CATEGORY = (
    "one of the configured categories (MEMLANE_CATEGORIES: preference, fact, decision, "
    "project unless set); another is a 422 naming them"
)


class MemoryCreate(Frozen):
    """A memory added by hand (API, CLI, facade)."""

    content: MemoryContent
    category: Category = Field("fact", description=CONFIGURED_CATEGORY)
    importance: Score01 = 0.7
    confidence: Score01 = 1.0
    tier: Tier = "candidate"
    sensitive: bool = False
    expires_at: UtcTime | None = None
    metadata: MetadataIn = Field(default_factory=dict)


class MemoryEdit(Frozen):
    """A correction of a memory: each field given replaces the stored one, each left out
    is kept; `expires_at` given as null clears the expiry. A new content re-keys and
    re-embeds the memory."""

    content: MemoryContent | None = None
    category: Category | None = None
    importance: Score01 | None = None
    confidence: Score01 | None = None
    expires_at: UtcTime | None = None


class MemoryPatch(MemoryEdit):
    """PATCH of a memory: a correction (MemoryEdit) and any of tier, status (restore,
    quarantine, forget) and sensitivity. Fields left out (or null) are not changed."""

    tier: Tier | None = None
    status: Literal["active", "quarantined", "deleted"] | None = None
    sensitive: bool | None = None


EventKind = Literal[
    "created",
    "confirmed",
    "superseded",
    "edited",
    "pinned",
    "verified",
    "demoted",
    "quarantined",
    "forgotten",
    "restored",
    "marked_sensitive",
    "unmarked_sensitive",
    "suppressed",
    "evidence_removed",
    "purged",
]


class MemoryEvent(Frozen):
    """One change of a memory. `actor`: `api:<key name>` (or `api` for an unnamed key or
    none), `cli`, `mcp` (memlane mcp), `worker` (extraction), `python` (the facade called
    directly), or
    `unknown` for memories made before history was kept. `detail`: `created` and
    `confirmed` by a worker name the job, conversation and message seqs; `superseded`
    names the memory that superseded it; `edited` maps each changed field to its old and
    new value; `suppressed` is a restatement of the forgotten memory that was not stored;
    `evidence_removed` names a deleted conversation whose evidence the memory lost."""

    id: int
    memory_id: str
    kind: EventKind
    actor: str
    at: datetime
    detail: dict[str, Any]


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
    language: str | None = Field(
        default=None,
        description="ISO 639-1 code of the language its keywords are of (detected from its "
        "text); null for a memory stored before languages were",
    )
    agent_id: str | None = Field(
        default=None,
        description="The agent this memory is specific to; null: about the user, seen by "
        "every agent of theirs",
    )
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        description="the metadata of the conversations it came from, merged (a key they "
        "gave different values holds the list of them), or given when added by hand",
    )


class MemoryPage(Frozen):
    """One page of a user's memories, newest first; `next_cursor` asks for the next."""

    memories: list[MemoryPublic]
    next_cursor: str | None = Field(
        description="pass it as `cursor` for the next page; null on the last page"
    )


class Remembered(Frozen):
    """What remembering one fact did: `stored` a new memory, or found it `known` (an
    active memory already says it: confirmed, as `add_memory` does)."""

    outcome: Literal["stored", "known"]
    memory: MemoryPublic


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
    # extracted memories not stored because the user had forgotten or purged them
    suppressed: int = 0
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None


class EnqueueResult(Frozen):
    conversation_id: str
    stored_messages: int
    skipped_messages: int
    job_ids: list[str]
    # Unknown message fields (`field:NAME`) and part types (`part:TYPE`) that were
    # ignored, with how often: worth a look when a count is unexpected.
    ignored_fields: dict[str, int] = Field(default_factory=dict)
    # Why `job_ids` is empty, when it is (memlane.pipeline.extraction.cadence.why_no_window).
    no_job_reason: str | None = None


# --------------------------------------------------------------------------- search


class SearchRequest(Frozen):
    """A search of one user's memories (POST /v1/search); see memlane.pipeline.ranking.search."""

    user_id: UserIdIn
    query: StoredText | None = Field(None, max_length=MAX_MESSAGE_CHARS)
    limit: int = Field(10, ge=1, le=200)
    category: Category | None = Field(None, description=CONFIGURED_CATEGORY)
    tier: Tier | None = None
    min_score: Score01 = 0.0
    since: UtcTime | None = Field(
        None,
        description="only memories stated or last confirmed at or after this time (UTC "
        "when no zone is given)",
    )
    include_sensitive: bool = False
    agent_id: UserIdIn | None = Field(
        None,
        description="search as this agent: the user's shared memories and this agent's; "
        "without one, the shared memories only",
    )
    filter: FilterIn = None


class SearchHit(Frozen):
    """A memory found, its score (the assembler's composite) and the score's parts."""

    memory: MemoryPublic
    score: float
    relevance: float
    importance: float = Field(description="importance weighed by confidence")
    recency: float
    frequency: float


class QueueStatus(Frozen):
    name: str
    workers: int | None = Field(
        description="workers consuming this queue that answered; null when not checked"
    )
    depth: int | None = Field(description="messages waiting on the broker; null when unknown")


class FleetStatus(Frozen):
    """Whether the background work is being done: `degraded` when the broker does not
    answer or a queue has no worker (contexts are still assembled; jobs wait)."""

    status: Literal["ok", "degraded"]
    mode: Literal["broker", "embedded"] = Field(
        description="embedded: no broker, jobs run in the process that enqueued them"
    )
    broker: str = Field(description='"ok", or why it is not')
    queues: list[QueueStatus]
    problems: list[str] = Field(description="what makes the status degraded, one line each")
    checked_at: datetime = Field(description="when this was checked (answers are cached ~5 s)")
