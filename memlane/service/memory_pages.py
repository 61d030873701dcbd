"""A page of a user's memories by cursor (`Memlane.memories_page`).

A cursor is opaque to callers: the `ref` of the last memory of a page (refs never change
and are never reused, so paging newest first by ref is exact however the store changes
between pages), base64url-encoded so nobody builds one by hand.
"""

from __future__ import annotations

import base64
import binascii

from memlane.models.db import unit_of_work
from memlane.models.schemas import MemoryPage
from memlane.models.store.memories import memories
from memlane.pipeline.errors import InvalidInputError
from memlane.pipeline.metadata.filters import Filter
from memlane.pipeline.records import MemoryStatus

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
    url: str,
    user_id: str,
    *,
    status: MemoryStatus | None,
    limit: int,
    cursor: str | None,
    agent_id: str | None = None,
    where: Filter | None = None,
) -> MemoryPage:
    if not 1 <= limit <= 1000:
        raise InvalidInputError(f"limit: must be between 1 and 1000, not {limit}")
    before = decode_cursor(cursor) if cursor else None
    with unit_of_work(url) as session:
        # One more than asked: whether a next page exists, without a count.
        rows = memories.page_for_user(
            session,
            user_id,
            status=status,
            limit=limit + 1,
            before_ref=before,
            agent_id=agent_id,
            where=where,
        )
    more = len(rows) > limit
    rows = rows[:limit]
    return MemoryPage(
        memories=rows, next_cursor=encode_cursor(rows[-1].ref) if more and rows else None
    )
