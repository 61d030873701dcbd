"""Whose rows an import touches: only the target user's. Ids are unique across the users
of a store, so an export may hold ids another user of this store has:

- a row whose own id (conversation, memory, episode, procedure) another user holds is
  imported under a new id, derived from the old one and the target user (the same on
  every import, so a second `--merge` of the same export finds it): a copy. Importing
  alice's export as bob on alice's store copies alice's data to bob this way.
- a reference to a conversation, memory or job that is not in the export and that
  another user holds is refused when the export is imported as its own user (the row
  would point into another user's data), and in a copy (`--user` another than the
  exported) it follows the copy: a conversation (and the memory of a purged memory's
  event) gets its new id, a supersession or job reference is cleared (jobs are not
  exported).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from memlane.models.store.users.import_rows import Scan
from memlane.models.tables import Conversation, EpisodeRow, Job, MemoryRow, ProcedureRow
from memlane.pipeline.errors import InvalidInputError

_ONE = {"conversations": "conversation", "memories": "memory", "jobs": "job"}
_COPY = uuid.UUID("3b2f7c1e-5d4a-4e8b-9c6f-1a2b3c4d5e6f")
Refs = tuple[tuple[str, str], ...]
_OWN: dict[str, Any] = {
    "conversations": Conversation,
    "memories": MemoryRow,
    "episodes": EpisodeRow,
    "procedures": ProcedureRow,
}
# (table, column) -> the kind of thing it names
_CONVERSATION_REFS: Refs = (
    ("messages", "conversation_id"),
    ("episodes", "conversation_id"),
    ("memories", "source_conversation_id"),
    ("memory_events", "conversation_id"),
)
_MEMORY_REFS: Refs = (("memories", "superseded_by"), ("memory_events", "memory_id"))
_JOB_REFS: Refs = (("memories", "source_job_id"), ("episodes", "job_id"))


def copy_id(kind: str, old: str, user_id: str) -> str:
    """The id a row of another user's gets in `user_id`'s copy: the same every time."""
    tag = uuid.uuid5(_COPY, f"{kind}\x00{user_id}\x00{old}").hex
    if kind == "conversations":  # a conversation's id is the chat app's: keep it readable
        return f"{old[:170]}~copy-{tag[:16]}"
    prefix = old.split("_", 1)[0] if "_" in old[:8] else "id"
    return f"{prefix}_{tag[:24]}"


def _owners(session: Session, column: Any, owner: Any, ids: Iterable[str]) -> dict[str, str]:
    wanted = sorted(set(ids))
    found: dict[str, str] = {}
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        found.update(
            (str(key), str(user))
            for key, user in session.execute(select(column, owner).where(column.in_(chunk)))
        )
    return found


@dataclass
class Placement:
    """What `place` decided, applied to each row as it is written (`apply`)."""

    renamed: dict[str, dict[str, str]]  # kind -> old id -> the copy's id
    cleared: dict[tuple[str, str], set[str]]  # (table, column) -> values set to None
    copied: int  # rows given a new id

    def apply(self, kind: str, values: dict[str, Any]) -> None:
        """The row's references cleared and its ids renamed, as `place` decided."""
        for (name, column), gone in self.cleared.items():
            if name == kind and values[column] in gone:
                values[column] = None
        for holder, refs in _HOLDERS:
            new = self.renamed[holder]
            for name, column in refs:
                if name == kind and new and values[column] in new:
                    values[column] = new[values[column]]

    def id_of(self, kind: str, old: str) -> str:
        return self.renamed[kind].get(old, old)


_HOLDERS: tuple[tuple[str, Refs], ...] = (
    ("conversations", (("conversations", "id"), *_CONVERSATION_REFS)),
    ("memories", (("memories", "id"), *_MEMORY_REFS)),
    ("episodes", (("episodes", "id"),)),
    ("procedures", (("procedures", "id"),)),
)


def place(session: Session, found: Scan, *, user_id: str, copy: bool) -> Placement:
    """Give the rows ids and references of `user_id`'s own (module docstring): the new
    ids and the cleared references, to apply to each row as it is written.
    InvalidInputError naming the line when a row of an export imported as its own user
    points into another user's data."""
    renamed: dict[str, dict[str, str]] = {}
    for kind, table in _OWN.items():
        held = _owners(session, table.id, table.user_id, found.ids[kind])
        renamed[kind] = {
            old: copy_id(kind, old, user_id) for old, owner in held.items() if owner != user_id
        }
    in_file = found.ids

    def outside(kind: str, refs: Refs) -> set[str]:
        return {
            value
            for ref in refs
            for value in found.named[ref]
            if value not in in_file.get(kind, set())
        }

    others: dict[str, set[str]] = {}
    conversations = _owners(
        session, Conversation.id, Conversation.user_id, outside("conversations", _CONVERSATION_REFS)
    )
    others["conversations"] = {c for c, owner in conversations.items() if owner != user_id}
    memories = _owners(session, MemoryRow.id, MemoryRow.user_id, outside("memories", _MEMORY_REFS))
    others["memories"] = {m for m, owner in memories.items() if owner != user_id}
    job_ids = outside("jobs", _JOB_REFS)
    jobs = _owners(session, Job.id, Job.user_id, job_ids)
    jobs.update(
        (job, owner)
        for job, owner in _owners(session, EpisodeRow.job_id, EpisodeRow.user_id, job_ids).items()
        if owner != user_id
    )
    others["jobs"] = {j for j, owner in jobs.items() if owner != user_id}

    pointers: tuple[tuple[str, Refs], ...] = (
        ("conversations", _CONVERSATION_REFS),
        ("memories", _MEMORY_REFS),
        ("jobs", _JOB_REFS),
    )
    cleared: dict[tuple[str, str], set[str]] = {}
    for kind, refs in pointers:
        for name, column in refs:
            named = found.named[(name, column)]
            theirs = sorted(
                (number, value) for value, number in named.items() if value in others[kind]
            )
            if not theirs:
                continue
            if not copy:
                number, value = theirs[0]
                raise InvalidInputError(
                    f"line {number}: {name}.{column}: {value!r} is another "
                    f"user's {_ONE[kind]}; an export names only its own user's data"
                )
            for _, value in theirs:
                if kind == "conversations" or (name, column) == ("memory_events", "memory_id"):
                    # the copy's own id for it (a purged memory's event keeps its place)
                    renamed[kind].setdefault(value, copy_id(kind, value, user_id))
                else:
                    cleared.setdefault((name, column), set()).add(value)
    copied = sum(len(renamed[kind].keys() & in_file[kind]) for kind in _OWN)
    return Placement(renamed=renamed, cleared=cleared, copied=copied)
