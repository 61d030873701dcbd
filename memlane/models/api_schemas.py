"""The HTTP API's own request and answer bodies (those that are not the facade's wire
schemas, memlane.models.schemas): shared by the routes (memlane.api.app) and the typed client
(memlane.client), which so imports neither FastAPI nor the facade."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memlane.models.schemas import (
    MAX_MESSAGE_CHARS,
    FilterIn,
    Identifier,
    StoredText,
    UserIdIn,
)
from memlane.pipeline.assembly.budget import MAX_BUDGET_TOKENS
from memlane.pipeline.assembly.context_format import Style
from memlane.pipeline.assembly.records import ContextPack
from memlane.pipeline.ranking.scoring import Strategy


class ContextRequest(BaseModel):
    """Budget: `budget_tokens` when given, else derived from `context_window` and the
    reservations (unset ones come from settings), else the default budget."""

    model_config = ConfigDict(extra="forbid")

    user_id: UserIdIn
    query: StoredText | None = Field(None, max_length=MAX_MESSAGE_CHARS)
    strategy: Strategy = "scored"
    budget_tokens: int | None = Field(None, ge=1, le=MAX_BUDGET_TOKENS)
    context_window: int | None = Field(None, ge=1, le=MAX_BUDGET_TOKENS)
    system_prompt_tokens: int | None = Field(None, ge=0, le=MAX_BUDGET_TOKENS)
    user_message_tokens: int | None = Field(None, ge=0, le=MAX_BUDGET_TOKENS)
    output_headroom: int | None = Field(None, ge=0, le=MAX_BUDGET_TOKENS)
    safety_margin: float | None = Field(None, ge=0.0, lt=1.0)
    model: str | None = Field(None, max_length=200, description="tokenizer of this model")
    include_sensitive: bool = False
    style: Style | None = Field(
        None, description="default, or compact (ids and content only) for tight budgets"
    )
    format: Literal["xml", "json"] = Field(
        "xml", description="`context` as the XML block (counted against the budget) or as JSON"
    )
    agent_id: UserIdIn | None = Field(
        None,
        description="assemble for this agent: the user's shared items and this agent's; "
        "without one, the shared items only",
    )
    filter: FilterIn = None  # memories and episodes whose metadata passes it


class ContextOut(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    context: str
    selection: dict[str, Any] = Field(alias="json")
    pack: ContextPack


class SoulIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    content: StoredText = Field(min_length=1, max_length=20_000)


class ProcedureIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: Identifier
    content: StoredText = Field(min_length=1, max_length=20_000)


class SweepOut(BaseModel):
    extract: list[str] = Field(description="jobs published to the extract queue")
    store: list[str] = Field(description="jobs published to the store queue")
    tails: int = Field(description="tail jobs started for idle conversations")
    messages_purged: int = Field(0, description="message texts purged by retention")
    packs_deleted: int = Field(0, description="context packs deleted by retention")


class ErasedOut(BaseModel):
    user_id: str
    deleted: dict[str, int] = Field(description="rows deleted per table")


class LiftedOut(BaseModel):
    user_id: str
    lifted: int = Field(description="fingerprints deleted")


class ConversationDeletedOut(BaseModel):
    user_id: str
    conversation_id: str
    deleted: dict[str, int] = Field(
        description="messages, jobs, episodes and memories deleted; memories kept without "
        "its evidence; memories restored (superseded by a deleted one)"
    )


class ImportedOut(BaseModel):
    user_id: str
    imported: dict[str, int] = Field(description="rows added per table")
    details: dict[str, int] = Field(
        default_factory=dict,
        description="what else the import did, when it did: stored_rows_kept (merge kept "
        "the stored rows of ids the user holds), copied_with_new_ids (rows whose ids "
        "another user of this store holds, imported under new ids), duplicate_memories "
        "and purged_memories (left out: a stored memory already says it, or a purge "
        "keeps it out)",
    )


class ForgetMatching(BaseModel):
    """POST …/memories/forget: the memories to forget, by their metadata."""

    model_config = ConfigDict(extra="forbid")

    filter: FilterIn = Field(..., description="a metadata filter (docs/metadata.md); {} is refused")


class ForgottenOut(BaseModel):
    forgotten: list[str] = Field(description="the ids of the memories forgotten")
