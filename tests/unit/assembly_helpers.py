"""Hand-built items for the assembler's tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from memlane.pipeline.assembly import context_format as fmt
from memlane.pipeline.assembly.records import AssemblyInput
from memlane.pipeline.assembly.tokens import count_tokens, get_encoding
from memlane.pipeline.records import EpisodeRecord, MemoryRecord, Procedure, SoulBlock
from tests.defaults import ASSEMBLY

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
ENCODING = get_encoding("cl100k_base")


def tokens(text: str) -> int:
    return count_tokens(text, ENCODING)


def days_ago(days: float) -> datetime:
    return NOW - timedelta(days=days)


def mem(
    memory_id: str,
    content: str | None = None,
    *,
    tier: str = "candidate",
    user: str = "u1",
    importance: float = 0.5,
    age_days: float = 1.0,
    **changes: Any,
) -> MemoryRecord:
    fields: dict[str, Any] = {
        "id": memory_id,
        "user_id": user,
        "content": content if content is not None else f"Fact number {memory_id}.",
        "category": "fact",
        "importance": importance,
        "confidence": 1.0,
        "tier": tier,
        "created_at": days_ago(age_days),
        "accessed_at": days_ago(age_days),
    }
    fields.update(changes)
    return MemoryRecord.model_validate(fields)


def soul(kind: str = "identity", content: str = "Alma, a careful assistant.", user: str = "u1"):
    return SoulBlock.model_validate(
        {"user_id": user, "kind": kind, "content": content, "updated_at": NOW}
    )


def episode(
    episode_id: str, summary: str | None = None, *, age_days: float = 1.0, user: str = "u1"
):
    return EpisodeRecord(
        id=episode_id,
        user_id=user,
        conversation_id="c1",
        summary=summary if summary is not None else f"Talked about topic {episode_id}.",
        topics=["auth"],
        outcome=None,
        created_at=days_ago(age_days),
    )


def procedure(procedure_id: str, name: str, keywords: set[str], user: str = "u1") -> Procedure:
    return Procedure(
        id=procedure_id,
        user_id=user,
        name=name,
        content=f"Steps of {name}.",
        keywords=frozenset(keywords),
        created_at=NOW,
    )


def request(**changes: Any) -> AssemblyInput:
    fields: dict[str, Any] = {
        "user_id": "u1",
        "query": None,
        "strategy": "important",
        "budget_tokens": 4_000,
        "now": NOW,
        "encoding": ENCODING,
        "retrieval_mode": "strategy-only",
        **ASSEMBLY,
    }
    fields.update(changes)
    return AssemblyInput(**fields)


def document(
    *,
    soul_blocks: list[SoulBlock] | None = None,
    memories: list[MemoryRecord] | None = None,
    episodes: list[EpisodeRecord] | None = None,
    procedures: list[Procedure] | None = None,
) -> str:
    """The XML the assembler should return for exactly these items."""
    return fmt.render_xml(
        fmt.Selection(
            user_id="u1",
            soul=soul_blocks or [],
            memories=memories or [],
            episodes=episodes or [],
            procedures=procedures or [],
        )
    )


def wrapper_tokens(section: fmt.SectionName) -> int:
    return tokens(fmt.section_open(section)) + tokens(fmt.section_close(section))
