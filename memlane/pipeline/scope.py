"""Agent scope: which of a user's items an agent sees, whom a learned memory belongs to,
and what deduplication across scopes does.

A memory or episode with no agent (`agent_id` None) is about the user: every agent of
the user, and a read naming no agent, sees it. One with an agent is that agent's alone.
A read for agent A sees the shared items plus A's; a read naming no agent sees the
shared ones only.

Deduplication compares within what one assembly can see together: the store stage reads
as known memories only those visible to the conversation's agent (shared + its own),
so a fact told about the user to agents A and B is one shared memory. Where a memory
about the user confirms one of A's own, that memory is promoted to shared (`promoted`):
the extractor has said it is about the user, and the user said it to A, so it is true
for every agent; a memory specific to A that confirms a shared one stays shared (it
never narrows).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from memlane.pipeline.records import ExtractedMemory, MemoryRecord

SHARED_SCOPE = "user"


def scope_label(agent_id: str | None) -> str:
    """How a pack names an item's scope: "user" (shared) or "agent:<id>"."""
    return SHARED_SCOPE if agent_id is None else f"agent:{agent_id}"


def sees(reader: str | None, owner: str | None) -> bool:
    """Whether a read for agent `reader` (None: no agent) sees an item of `owner`
    (None: shared)."""
    return owner is None or owner == reader


def visible(records: Iterable[MemoryRecord], reader: str | None) -> list[MemoryRecord]:
    """The records a read for `reader` sees, in their order."""
    return [r for r in records if sees(reader, r.agent_id)]


def memory_scope(memory: ExtractedMemory, agent_id: str | None) -> str | None:
    """The agent a memory extracted from a conversation with `agent_id` belongs to: the
    agent when the extractor said the memory is about it, else None (about the user).
    Without an agent every memory is shared, whatever the extractor said."""
    return agent_id if agent_id is not None and memory.about == "agent" else None


def insert_scope(scopes: Sequence[str | None], sighting_indices: Iterable[int]) -> str | None:
    """The scope of one inserted memory, from the scopes of the sightings merged into
    it: shared when any of them is about the user (one fact, the widest reading)."""
    owners = {scopes[i] for i in sighting_indices}
    if None in owners or not owners:
        return None
    return min(o for o in owners if o is not None)


def promoted(
    confirmations: Iterable[tuple[str, Sequence[int]]],
    known: Mapping[str, MemoryRecord],
    scopes: Sequence[str | None],
) -> list[str]:
    """The agent-specific known memories a memory about the user confirms (or re-reads):
    each becomes shared (module docstring). `confirmations`: (memory id, the sighting
    indices confirming it) of the plan's bumps and re-reads. In id order."""
    ids = {
        memory_id
        for memory_id, indices in confirmations
        if (record := known.get(memory_id)) is not None
        and record.agent_id is not None
        and any(scopes[i] is None for i in indices)
    }
    return sorted(ids)
