"""The rows of an export as the import reads them: one strict schema per table, with the
types, enums, ranges and text rules of the API's own schemas (models/schemas.py,
pipeline/records.py), so an import stores nothing another door would refuse and nothing
that a later read (assemble, list, search) cannot turn back into a record.

A row that does not fit is refused with InvalidInputError naming its line and field
path (`line 7: memories.importance: Input should be less than or equal to 1`); the
import is refused whole, before anything is written. Times are ISO 8601 strings; one
without a zone is read as UTC, as every door reads it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any

import numpy as np
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
)

from memlane.models.schemas import (
    MAX_MESSAGE_CHARS,
    EventKind,
    Identifier,
    MemoryContent,
    MetadataIn,
    StoredText,
    UserIdIn,
    as_utc,
    storable_text,
)
from memlane.pipeline.errors import InvalidInputError
from memlane.pipeline.records import Category, MemoryStatus, Role, Score01, SoulKind, Tier

# A memory's history detail is small JSON; deeper than this is no export of ours.
MAX_DETAIL_DEPTH = 6
MAX_KEYWORDS = 200
MAX_VECTOR = 8192


def _time_text(value: Any) -> Any:
    # Strict: an export writes times as ISO 8601 text, never as numbers.
    if not isinstance(value, str):
        raise ValueError("a time is ISO 8601 text, such as 2025-01-31T09:00:00+00:00")
    return value


def _depth(value: Any, level: int = 0) -> int:
    if level > MAX_DETAIL_DEPTH:
        return level
    if isinstance(value, Mapping):
        return max((_depth(v, level + 1) for v in value.values()), default=level + 1)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level + 1)
    return level


def _shallow(value: dict[str, Any]) -> dict[str, Any]:
    if _depth(value) > MAX_DETAIL_DEPTH:
        raise ValueError(f"is nested deeper than {MAX_DETAIL_DEPTH} levels")
    for key in value:
        storable_text(key)
    return value


Time = Annotated[datetime, BeforeValidator(_time_text), Field(strict=False), AfterValidator(as_utc)]
ItemId = Annotated[Identifier, StringConstraints(max_length=40)]
Ref = Annotated[int, Field(ge=1, le=2**31 - 1)]
Seq = Annotated[int, Field(ge=0, le=2**31 - 1)]
Count = Annotated[int, Field(ge=0, le=2**31 - 1)]
Keyword = Annotated[
    str, StringConstraints(min_length=1, max_length=100), AfterValidator(storable_text)
]
Keywords = Annotated[list[Keyword], Field(max_length=MAX_KEYWORDS)]
Vector = Annotated[
    list[Annotated[float, Field(allow_inf_nan=False)]], Field(min_length=1, max_length=MAX_VECTOR)
]
ModelName = Annotated[StoredText, StringConstraints(max_length=200)]
LongText = Annotated[StoredText, StringConstraints(max_length=MAX_MESSAGE_CHARS)]


class _Row(BaseModel):
    # strict: "0.5" is no number, 1 no boolean; unknown columns are refused
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    user_id: Identifier | None = None


class ConversationRowIn(_Row):
    id: Identifier
    message_count: Count = 0
    assistant_count: Count = 0
    extracted_to_seq: Annotated[int, Field(ge=-1, le=2**31 - 1)] = -1
    final: bool = False
    created_at: Time
    last_message_at: Time
    agent_id: UserIdIn | None = None  # an agent id follows the user id's rule
    metadata: MetadataIn = Field(default_factory=dict)  # checked as a transcript's


# ISO 639-1 (or -3), as the store writes it (memlane.pipeline.language.detect)
Language = Annotated[str, StringConstraints(pattern=r"^[a-z]{2,3}$")]


class MessageRowIn(_Row):
    conversation_id: Identifier
    seq: Seq
    external_id: Identifier | None = None
    role: Role
    content: Annotated[StoredText, StringConstraints(max_length=MAX_MESSAGE_CHARS)]
    content_sha256: Annotated[str, StringConstraints(pattern=r"^([0-9a-f]{64})?$")]
    created_at: Time
    purged_at: Time | None = None
    language: Language | None = None


class MemoryRowIn(_Row):
    id: ItemId
    content: MemoryContent
    category: Category
    importance: Score01
    confidence: Score01
    tier: Tier = "candidate"
    status: MemoryStatus = "active"
    sensitive: bool = False
    expires_at: Time | None = None
    keywords: Keywords = Field(default_factory=list)
    language: Language | None = None
    embedding: Vector | None = None
    embedding_model: ModelName | None = None
    embedding_dim: Annotated[int, Field(ge=1, le=MAX_VECTOR)] | None = None
    access_count: Count = 1
    created_at: Time
    confirmed_at: Time
    accessed_at: Time
    ref: Ref
    superseded_by: ItemId | None = None
    source_conversation_id: Identifier | None = None
    source_job_id: ItemId | None = None
    source_from_seq: Seq | None = None
    source_to_seq: Seq | None = None
    evidence_seq: Seq | None = None
    agent_id: UserIdIn | None = None
    metadata: MetadataIn = Field(default_factory=dict)


class MemoryEventRowIn(_Row):
    memory_id: ItemId
    conversation_id: Identifier | None = None
    kind: EventKind
    actor: Annotated[StoredText, StringConstraints(min_length=1, max_length=120)]
    at: Time
    detail: Annotated[dict[str, Any], AfterValidator(_shallow)] = Field(default_factory=dict)


class EpisodeRowIn(_Row):
    id: ItemId
    conversation_id: Identifier
    job_id: ItemId | None = None
    summary: Annotated[StoredText, StringConstraints(min_length=1, max_length=MAX_MESSAGE_CHARS)]
    topics: Annotated[
        list[Annotated[StoredText, StringConstraints(max_length=200)]],
        Field(max_length=MAX_KEYWORDS),
    ] = Field(default_factory=list)
    outcome: LongText | None = None
    created_at: Time
    ref: Ref
    embedding: Vector | None = None
    embedding_model: ModelName | None = None
    embedding_dim: Annotated[int, Field(ge=1, le=MAX_VECTOR)] | None = None
    agent_id: UserIdIn | None = None
    metadata: MetadataIn = Field(default_factory=dict)


class SoulBlockRowIn(_Row):
    kind: SoulKind
    content: Annotated[StoredText, StringConstraints(max_length=20_000)]
    updated_at: Time


class ProcedureRowIn(_Row):
    id: ItemId
    name: Identifier
    content: Annotated[StoredText, StringConstraints(min_length=1, max_length=20_000)]
    keywords: Keywords = Field(default_factory=list)
    created_at: Time
    ref: Ref


SCHEMAS: dict[str, type[_Row]] = {
    "conversations": ConversationRowIn,
    "messages": MessageRowIn,
    "memories": MemoryRowIn,
    "memory_events": MemoryEventRowIn,
    "episodes": EpisodeRowIn,
    "procedures": ProcedureRowIn,
    "soul_blocks": SoulBlockRowIn,
}


def read_row(number: int, kind: str, row: Any) -> dict[str, Any]:
    """The row's values as the table takes them, or InvalidInputError naming the line
    and the first field at fault (`memories.tier`, `memories.keywords.3`)."""
    if not isinstance(row, dict):
        raise InvalidInputError(f"line {number}: {kind}: a row is a JSON object")
    try:
        parsed = SCHEMAS[kind].model_validate(row)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in (kind, *first["loc"]))
        problem = str(first["msg"]).removeprefix("Value error, ")
        more = len(exc.errors()) - 1
        also = f" (and {more} more problem{'s' if more > 1 else ''} in this row)" if more else ""
        raise InvalidInputError(f"line {number}: {where}: {problem}{also}") from None
    return parsed.model_dump()


# Keys that repeat nothing in one export: the table's own key, and what the store keeps
# unique (a message's place, an episode's job, a procedure's name, a short id).
_UNIQUE: dict[str, tuple[tuple[str, ...], ...]] = {
    "conversations": (("id",),),
    "messages": (("conversation_id", "seq"), ("conversation_id", "external_id")),
    "memories": (("id",),),
    "episodes": (("id",), ("job_id",)),
    "procedures": (("id",), ("name",)),
    "soul_blocks": (("kind",),),
}
WITH_REF = ("memories", "episodes", "procedures")


# The columns whose values the later checks look up (import_owners.py): (table, column).
TRACKED: tuple[tuple[str, str], ...] = (
    ("messages", "conversation_id"),
    ("episodes", "conversation_id"),
    ("memories", "source_conversation_id"),
    ("memory_events", "conversation_id"),
    ("memories", "superseded_by"),
    ("memory_events", "memory_id"),
    ("memories", "source_job_id"),
    ("episodes", "job_id"),
)


@dataclass
class Scan:
    """What the first reading of an export keeps: ids, keys and short ids (small), never
    the rows, so an import's memory does not grow with its vectors and texts."""

    ids: dict[str, set[str]] = field(default_factory=dict)  # conversations, memories, …
    rows: dict[str, int] = field(default_factory=dict)  # rows per table
    # (table, column) -> value -> the first line naming it
    named: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    soul_kinds: set[str] = field(default_factory=set)
    procedure_names: dict[str, str] = field(default_factory=dict)  # id -> name
    refs: dict[tuple[str, str], int] = field(default_factory=dict)  # (table, id) -> ref
    active: list[tuple[str, str]] = field(default_factory=list)  # (id, content), in order
    # no conversation after a message: one more reading writes them all, parents first
    in_order: bool = True
    # a memory's history other than a purge's event: memory id -> first line
    history: dict[str, int] = field(default_factory=dict)


def rows_of(
    records: Iterable[tuple[int, dict[str, Any]]], kinds: Collection[str]
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The rows of `kinds` (checked already by `scan`), as the table takes them."""
    for number, record in records:
        kind = record.get("kind")
        if kind not in kinds:
            continue
        values = read_row(number, str(kind), record.get("row"))
        values.pop("user_id", None)
        if values.get("embedding") is not None:  # float32, as stored: 1/6 of a list's size
            values["embedding"] = np.asarray(values["embedding"], dtype=np.float32)
        yield str(kind), values


def scan(
    records: Iterable[tuple[int, dict[str, Any]]], *, exported: str, tables: Mapping[str, Any]
) -> Scan:
    """Every row of the export validated, what the later checks need kept (Scan);
    InvalidInputError at the first row that does not fit, repeats a key of an earlier
    row, names another user, or belongs to a conversation or a memory the export does
    not hold."""
    found = Scan(
        ids={kind: set() for kind in ("conversations", "memories", "episodes", "procedures")},
        rows=dict.fromkeys(tables, 0),
        named={key: {} for key in TRACKED},
    )
    seen: dict[tuple[str, ...], int] = {}
    for number, record in records:
        named_kind = record.get("kind")
        if named_kind not in tables:
            known = ", ".join(tables)
            raise InvalidInputError(
                f"line {number}: kind: {named_kind!r} is not an exported table (one of {known})"
            )
        kind = str(named_kind)
        if set(record) - {"kind", "row"}:
            extra = sorted(set(record) - {"kind", "row"})
            raise InvalidInputError(f"line {number}: a line holds kind and row, not {extra}")
        values = read_row(number, kind, record.get("row"))
        owner = values.pop("user_id", None)
        if owner is not None and owner != exported:
            raise InvalidInputError(
                f"line {number}: {kind}.user_id: {owner!r} is not the exported user "
                f"{exported!r}; an export holds one user's rows"
            )
        keys = [(kind, *columns) for columns in _UNIQUE.get(kind, ())]
        if kind in WITH_REF:
            keys.append(("ref",))
        for key in keys:
            columns = key[1:] if key != ("ref",) else key
            value = tuple(str(values[c]) for c in columns)
            if any(values[c] is None for c in columns):
                continue
            if (*key, *value) in seen:
                where = ".".join((kind, *columns)) if key != ("ref",) else f"{kind}.ref"
                raise InvalidInputError(
                    f"line {number}: {where}: {', '.join(value)} repeats line "
                    f"{seen[(*key, *value)]}; an export holds each once"
                )
            seen[(*key, *value)] = number
        _keep(found, kind, values, number)
        if kind == "conversations" and found.rows["messages"]:
            found.in_order = False
    _belongs(found)
    return found


def _keep(found: Scan, kind: str, values: dict[str, Any], number: int) -> None:
    found.rows[kind] += 1
    if kind in found.ids:
        found.ids[kind].add(values["id"])
    for (name, column), first in found.named.items():
        if name == kind and values[column] is not None:
            first.setdefault(values[column], number)
    if kind in WITH_REF:
        found.refs[(kind, values["id"])] = values["ref"]
    if kind == "soul_blocks":
        found.soul_kinds.add(values["kind"])
    elif kind == "procedures":
        found.procedure_names[values["id"]] = values["name"]
    elif kind == "memories" and values["status"] == "active":
        found.active.append((values["id"], values["content"]))
    elif kind == "memory_events" and values["kind"] != "purged":
        found.history.setdefault(values["memory_id"], number)


def _belongs(found: Scan) -> None:
    conversations = found.ids["conversations"]
    stray = [
        (number, value)
        for value, number in found.named[("messages", "conversation_id")].items()
        if value not in conversations
    ]
    if stray:
        number, value = min(stray)
        raise InvalidInputError(
            f"line {number}: messages.conversation_id: "
            f"{value!r} is no conversation of this export; a "
            "message is imported with its conversation"
        )
    memories = found.ids["memories"]
    # a purged memory's row is gone; its `purged` event stays, and is exported
    lone = [(number, value) for value, number in found.history.items() if value not in memories]
    if lone:
        number, value = min(lone)
        raise InvalidInputError(
            f"line {number}: memory_events.memory_id: {value!r} "
            "is no memory of this export; history is imported with its memory (only "
            "a purged memory's `purged` event stays without it)"
        )
