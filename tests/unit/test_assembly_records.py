"""The store's rows become MemoryRecords through one converter, validated as any record is."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from memlane.models.store.reads.assembly import _COLUMNS, _record
from memlane.models.store.rows import _NAMES, stored_record
from memlane.pipeline.records import MemoryRecord

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
# The candidates statement's layout: the record columns, then cosine and text rank.
COLUMNS = (*(column.key for column in _COLUMNS), "relevance", "lexical")


def test_a_record_is_what_model_construct_and_validation_give() -> None:
    values = dict(
        id="mem_1",
        user_id="u1",
        content="Prefers TypeScript.",
        category="preference",
        importance=0.8,
        confidence=0.7,
        tier="verified",
        status="active",
        sensitive=True,
        expires_at=NOW,
        access_count=4,
        created_at=NOW,
        confirmed_at=NOW,
        accessed_at=NOW,
        ref=7,
    )
    row = (*values.values(), "hashing-256", 256, None, 0.5, None)  # no agent: shared
    at = {name: i for i, name in enumerate(COLUMNS)}
    record = _record(row, at)
    constructed = MemoryRecord.model_construct(**values)
    validated = MemoryRecord.model_validate(values)
    assert record == constructed == validated
    assert record.model_dump() == validated.model_dump()
    assert record.model_copy(update={"tier": "pinned"}).tier == "pinned"
    assert repr(record) == repr(constructed)


def test_a_stored_record_is_what_model_construct_gives() -> None:
    values = dict(
        id="mem_1",
        user_id="u1",
        content="Prefers TypeScript.",
        category="preference",
        importance=0.8,
        confidence=0.7,
        tier="verified",
        status="active",
        sensitive=False,
        expires_at=None,
        keywords=frozenset({"prefer", "typescript"}),
        access_count=4,
        created_at=NOW,
        confirmed_at=NOW,
        accessed_at=NOW,
        ref=7,
        source_conversation_id="c1",
        source_job_id="job_1",
        evidence_seq=3,
        agent_id="agent-a",
        metadata={"team": ["eng", "ops"]},
    )
    assert list(values) == _NAMES  # the read's columns, in order
    record = stored_record(dict(values))
    assert record == MemoryRecord.model_construct(**values) == MemoryRecord.model_validate(values)
    assert record.model_dump() == MemoryRecord.model_validate(values).model_dump()
    assert record.model_copy(update={"tier": "pinned"}).tier == "pinned"


def test_a_row_no_record_could_hold_fails_loudly() -> None:
    values = dict(
        id="mem_1",
        user_id="u1",
        content="Prefers TypeScript.",
        category="preference",
        importance=1.5,  # outside [0, 1]: a bad write or a bad migration
        confidence=0.7,
        created_at=NOW,
        confirmed_at=NOW,
        accessed_at=NOW,
    )
    with pytest.raises(ValidationError, match="importance"):
        stored_record(values)
