"""Two facade calls kept out of facade.py: a page of a user's memories by cursor, and
remembering one fact as dedup would.

A cursor is opaque to callers: the `ref` of the last memory of a page (refs never change
and are never reused, so paging newest first by ref is exact however the store changes
between pages), base64url-encoded so nobody builds one by hand.

Remembering a fact (`Memlane.remember`, the MCP server's `remember` tool) stores it at
once, without the extraction pipeline, by the rule of every fact added by hand
(`Memlane.add_or_confirm`): a fact an active memory already says (a duplicate, as
pipeline.dedup decides) is `known` and confirms it, as `add_memory` does; a fact the user
asked to forget stays forgotten (pipeline.dedup rule 0), a ConflictError saying how to
restore it.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from memlane.models.db import unit_of_work
from memlane.models.schemas import MemoryCreate, MemoryPage, Remembered
from memlane.models.store import memories
from memlane.pipeline.errors import InvalidInputError
from memlane.pipeline.records import MemoryStatus

if TYPE_CHECKING:
    from memlane.facade import Memlane

_PREFIX = "ref:"


def encode_cursor(ref: int) -> str:
    return base64.urlsafe_b64encode(f"{_PREFIX}{ref}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    """The ref a cursor carries; InvalidInputError for anything no page handed out."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        text = base64.urlsafe_b64decode(padded.encode("ascii")).decode()
        if text.startswith(_PREFIX) and text[len(_PREFIX) :].isdigit():
            return int(text[len(_PREFIX) :])
    except (binascii.Error, UnicodeError, ValueError):
        pass
    raise InvalidInputError(
        f"cursor: {cursor[:40]!r} is not a cursor memlane handed out; "
        "leave it out for the first page"
    )


def memories_page(
    lane: Memlane,
    user_id: str,
    *,
    status: MemoryStatus | None,
    limit: int,
    cursor: str | None,
) -> MemoryPage:
    if not 1 <= limit <= 1000:
        raise InvalidInputError(f"limit: must be between 1 and 1000, not {limit}")
    before = decode_cursor(cursor) if cursor else None
    with unit_of_work(lane.url) as session:
        # One more than asked: whether a next page exists, without a count.
        rows = memories.page_for_user(
            session, user_id, status=status, limit=limit + 1, before_ref=before
        )
    more = len(rows) > limit
    rows = rows[:limit]
    return MemoryPage(
        memories=rows, next_cursor=encode_cursor(rows[-1].ref) if more and rows else None
    )


def remember(
    lane: Memlane, user_id: str, memory: MemoryCreate | Mapping[str, Any] | str
) -> Remembered:
    """One rule for facts added by hand: `add_or_confirm`'s. A duplicate of an active
    memory confirms it (seen once more, importance and confidence raised), as
    `add_memory` does; one of a forgotten memory is refused (ConflictError)."""
    if isinstance(memory, str):
        created = MemoryCreate(content=memory)
    elif isinstance(memory, MemoryCreate):
        created = memory
    else:
        created = MemoryCreate.model_validate(memory)
    stored, new = lane.add_or_confirm(user_id, created)
    return Remembered(outcome="stored" if new else "known", memory=stored)
