"""The deduplication plan: what one batch of extracted memories does to a user's store.

`plan(extracted, known, now=…)` decides; the store applies the plan under the user's
lock. The pairwise rules (duplicate, conflict, Jaccard) live in
memlane.pipeline.dedup.similarity and are re-exported here.

Rules, in order:
0. A forgotten known memory (`status == "deleted"`, a user's "forget this") stays
   forgotten: an extracted memory that duplicates one and no active memory is dropped
   (`forgotten`), neither inserted nor confirming anything.
1. Otherwise only `status == "active"` known memories count. Each extracted memory that
   duplicates one of them confirms the best match (highest keyword Jaccard, ties by
   lowest id).
2. A confirmation counts once per distinct piece of evidence: a sighting's evidence is a
   message range of a conversation, and overlapping ranges of one conversation are one
   piece. A sighting re-read from messages that already evidenced the memory (same
   conversation as the memory's source, evidence_to_seq ≤ its evidence_seq) is no new
   evidence. A known memory with new evidence is bumped: access_count += increment,
   confirmed_at = when the newest confirming message was said (`stated_at`, never
   later than `now`; `now` only for a message whose time is unknown), importance and
   confidence raised to the max of all involved; one with none is only noted as
   re-read (nothing changes).
3. The other extracted memories are grouped: each joins the first group whose first
   member it duplicates, else starts one. A group is one insert, with the highest
   importance and confidence of its members and access_count = its distinct evidence.
4. Conflicts (opposite polarity, same topic) are settled by recency, a claim's recency
   being (its newest evidence_to_seq, its last sighting index): of two conflicting
   inserts the older is inserted already superseded; an insert older than a conflicting
   known memory's confirmation in this batch is inserted superseded; otherwise each known
   memory conflicting with active inserts is superseded by the newest of them. Superseded
   memories are kept, never deleted.
Every extracted memory ends up in exactly one insert, bump, re-read or forgotten
(`accounted`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from itertools import combinations
from typing import Literal

from memlane.pipeline.dedup.keywords import keywords
from memlane.pipeline.dedup.similarity import (
    Statement,
    conflicts,
    is_duplicate,
    jaccard,
    statements_conflict,
    statements_duplicate,
)
from memlane.pipeline.records import ExtractedMemory, MemoryRecord

__all__ = [
    "DedupPlan",
    "PlannedBump",
    "PlannedForgotten",
    "PlannedInsert",
    "PlannedReread",
    "PlannedSupersede",
    "Sighting",
    "accounted",
    "conflicts",
    "distinct_evidence",
    "duplicate_of",
    "is_duplicate",
    "jaccard",
    "plan",
]


@dataclass(frozen=True, slots=True)
class Sighting:
    """An extracted memory and the messages that evidenced it."""

    memory: ExtractedMemory
    keywords: frozenset[str]
    conversation_id: str
    evidence_from_seq: int
    evidence_to_seq: int

    def __post_init__(self) -> None:
        if self.evidence_from_seq > self.evidence_to_seq:
            raise ValueError(
                f"evidence range {self.evidence_from_seq}..{self.evidence_to_seq} is empty"
            )

    @classmethod
    def of(
        cls, memory: ExtractedMemory, *, conversation_id: str, new_from_seq: int, end_seq: int
    ) -> Sighting:
        """The memory's own message when the extractor named it (source_seq), otherwise
        the window's new part [new_from_seq, end_seq]."""
        if memory.source_seq is not None:
            start = stop = memory.source_seq
        else:
            start, stop = new_from_seq, end_seq
        return cls(memory, keywords(memory.content), conversation_id, start, stop)


@dataclass(frozen=True, slots=True)
class PlannedInsert:
    sighting_indices: tuple[int, ...]  # the group's first member first
    memory: ExtractedMemory  # the first member, importance/confidence raised to the max
    keywords: frozenset[str]
    access_count: int  # distinct evidence among the members, ≥ 1
    conversation_id: str
    evidence_from_seq: int  # over the members from conversation_id
    evidence_to_seq: int
    status: Literal["active", "superseded"]

    @property
    def sighting_index(self) -> int:
        return self.sighting_indices[0]


@dataclass(frozen=True, slots=True)
class PlannedBump:
    memory_id: str
    increment: int  # ≥ 1; add to access_count in SQL, not to a value read earlier
    importance: float
    confidence: float
    confirmed_at: datetime  # the store never moves a memory's confirmed_at backwards
    evidence_seq: int | None  # the value to store (unchanged for other conversations)
    sighting_indices: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PlannedReread:
    """Known memory re-read from messages that already evidenced it: nothing changes."""

    memory_id: str
    sighting_indices: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PlannedForgotten:
    """Extracted memories repeating a memory the user had forgotten: dropped (rule 0)."""

    memory_id: str
    sighting_indices: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PlannedSupersede:
    memory_id: str  # a known memory, set to status "superseded"
    by_insert: int  # index into DedupPlan.inserts


@dataclass(frozen=True, slots=True)
class DedupPlan:
    inserts: tuple[PlannedInsert, ...]
    bumps: tuple[PlannedBump, ...]
    rereads: tuple[PlannedReread, ...]
    supersedes: tuple[PlannedSupersede, ...]
    forgotten: tuple[PlannedForgotten, ...] = ()


def accounted(plan: DedupPlan) -> list[int]:
    """Every sighting index the plan places, sorted, repeats kept: a sound plan of n
    sightings gives exactly list(range(n))."""
    parts: list[PlannedInsert | PlannedBump | PlannedReread | PlannedForgotten] = [
        *plan.inserts,
        *plan.bumps,
        *plan.rereads,
        *plan.forgotten,
    ]
    return sorted(index for part in parts for index in part.sighting_indices)


def distinct_evidence(sightings: Iterable[Sighting]) -> int:
    """How many pieces of evidence: overlapping message ranges of one conversation
    count once (seq 12 and the window 10..14 are the same reading)."""
    ranges: dict[str, list[tuple[int, int]]] = {}
    for sighting in sightings:
        ranges.setdefault(sighting.conversation_id, []).append(
            (sighting.evidence_from_seq, sighting.evidence_to_seq)
        )
    count = 0
    for spans in ranges.values():
        end: int | None = None
        for start, stop in sorted(spans):
            if end is None or start > end:
                count += 1
                end = stop
            else:
                end = max(end, stop)
    return count


def _is_reread(sighting: Sighting, record: MemoryRecord) -> bool:
    return (
        record.source_conversation_id == sighting.conversation_id
        and record.evidence_seq is not None
        and sighting.evidence_to_seq <= record.evidence_seq
    )


def _recency(sightings: Sequence[Sighting], indices: Sequence[int]) -> tuple[int, int]:
    return max(sightings[i].evidence_to_seq for i in indices), max(indices)


class _Known:
    """The statements of known memories, each made when first compared: a short new
    memory may duplicate hundreds of stored ones (bench/README.md, dedup), and only the
    best of them needs its polarity read from its text."""

    def __init__(self, records: Sequence[MemoryRecord]) -> None:
        self.keywords = [k.keywords or keywords(k.content) for k in records]
        self._texts = [k.content for k in records]
        self._made: dict[int, Statement] = {}

    def __getitem__(self, position: int) -> Statement:
        made = self._made.get(position)
        if made is None:
            made = Statement.of(self._texts[position], self.keywords[position])
            self._made[position] = made
        return made


def _best_duplicate(
    statement: Statement, stored: _Known, threshold: float, min_keywords: int
) -> int | None:
    """The duplicate of highest keyword Jaccard, ties by position: the first duplicate
    in that order, so the statements behind it are never made."""
    ranked = sorted(
        (-jaccard(statement.keywords, words), position)
        for position, words in enumerate(stored.keywords)
    )
    return next(
        (
            position
            for _, position in ranked
            if statements_duplicate(
                statement, stored[position], threshold=threshold, min_keywords=min_keywords
            )
        ),
        None,
    )


def _bump_or_reread(
    record: MemoryRecord,
    sightings: Sequence[Sighting],
    indices: list[int],
    now: datetime,
    stated_at: Mapping[int, datetime],
) -> PlannedBump | PlannedReread:
    fresh = [sightings[i] for i in indices if not _is_reread(sightings[i], record)]
    increment = distinct_evidence(fresh)
    if increment == 0:
        return PlannedReread(record.id, tuple(indices))
    involved = [sightings[i].memory for i in indices]
    same_source = [
        s.evidence_to_seq for s in fresh if s.conversation_id == record.source_conversation_id
    ]
    if record.evidence_seq is not None:
        same_source.append(record.evidence_seq)
    return PlannedBump(
        memory_id=record.id,
        increment=increment,
        importance=max(record.importance, *(m.importance for m in involved)),
        confidence=max(record.confidence, *(m.confidence for m in involved)),
        confirmed_at=max(min(now, stated_at.get(s.evidence_to_seq, now)) for s in fresh),
        evidence_seq=max(same_source) if same_source else None,
        sighting_indices=tuple(indices),
    )


def _insert(
    sightings: Sequence[Sighting], group: list[int], status: Literal["active", "superseded"]
) -> PlannedInsert:
    first = sightings[group[0]]
    members = [sightings[i] for i in group]
    own = [m for m in members if m.conversation_id == first.conversation_id]
    memory = first.memory.model_copy(
        update={
            "importance": max(m.memory.importance for m in members),
            "confidence": max(m.memory.confidence for m in members),
        }
    )
    return PlannedInsert(
        sighting_indices=tuple(group),
        memory=memory,
        keywords=first.keywords,
        access_count=distinct_evidence(members),
        conversation_id=first.conversation_id,
        evidence_from_seq=min(m.evidence_from_seq for m in own),
        evidence_to_seq=max(m.evidence_to_seq for m in own),
        status=status,
    )


def plan(
    extracted: Sequence[Sighting],
    known: Sequence[MemoryRecord],
    *,
    now: datetime,
    stated_at: Mapping[int, datetime] | None = None,
    threshold: float,
    min_keywords: int,
) -> DedupPlan:
    """Decide inserts, bumps, re-reads and supersessions (rules in the module docstring).
    `stated_at` maps a message seq of the sightings' conversation to when it was said.
    Deterministic: the same sightings in the same order and the same known memories in
    any order give the same plan."""
    duplicate = partial(statements_duplicate, threshold=threshold, min_keywords=min_keywords)
    conflict = partial(statements_conflict, threshold=threshold, min_keywords=min_keywords)
    active = sorted((k for k in known if k.status == "active"), key=lambda k: k.id)
    stored = _Known(active)
    new = [Statement.of(s.memory.content, s.keywords) for s in extracted]

    gone = sorted((k for k in known if k.status == "deleted"), key=lambda k: k.id)
    tombstones = _Known(gone)

    confirming: dict[int, list[int]] = {}
    dropped: dict[int, list[int]] = {}
    unmatched: list[int] = []
    for index, statement in enumerate(new):
        position = _best_duplicate(statement, stored, threshold, min_keywords)
        if position is not None:
            confirming.setdefault(position, []).append(index)
        elif (tomb := _best_duplicate(statement, tombstones, threshold, min_keywords)) is not None:
            dropped.setdefault(tomb, []).append(index)
        else:
            unmatched.append(index)

    groups: list[list[int]] = []
    for index in unmatched:
        home = next((g for g in groups if duplicate(new[g[0]], new[index])), None)
        if home is None:
            groups.append([index])
        else:
            home.append(index)

    recency = [_recency(extracted, group) for group in groups]
    superseded: set[int] = set()
    for a, b in combinations(range(len(groups)), 2):
        if conflict(new[groups[a][0]], new[groups[b][0]]):
            superseded.add(min(a, b, key=recency.__getitem__))
    for g, group in enumerate(groups):
        for position, indices in confirming.items():
            if conflict(new[group[0]], stored[position]) and (
                _recency(extracted, indices) > recency[g]
            ):
                superseded.add(g)

    supersedes: list[PlannedSupersede] = []
    for position, record in enumerate(active):
        rivals = [
            g
            for g, group in enumerate(groups)
            if g not in superseded and conflict(new[group[0]], stored[position])
        ]
        if rivals:
            supersedes.append(PlannedSupersede(record.id, max(rivals, key=recency.__getitem__)))

    confirmations = [
        _bump_or_reread(active[position], extracted, confirming[position], now, stated_at or {})
        for position in sorted(confirming)
    ]
    return DedupPlan(
        inserts=tuple(
            _insert(extracted, group, "superseded" if g in superseded else "active")
            for g, group in enumerate(groups)
        ),
        bumps=tuple(c for c in confirmations if isinstance(c, PlannedBump)),
        rereads=tuple(c for c in confirmations if isinstance(c, PlannedReread)),
        supersedes=tuple(supersedes),
        forgotten=tuple(
            PlannedForgotten(gone[position].id, tuple(indices))
            for position, indices in sorted(dropped.items())
        ),
    )


def duplicate_of(
    content: str,
    words: frozenset[str],
    known: Sequence[MemoryRecord],
    *,
    threshold: float,
    min_keywords: int,
) -> MemoryRecord | None:
    """The known memory a statement added by hand duplicates, by the rules above: the
    best active match (rule 1), else the best forgotten one (rule 0), else None."""
    statement = Statement.of(content, words)
    for status in ("active", "deleted"):
        pool = sorted((k for k in known if k.status == status), key=lambda k: k.id)
        position = _best_duplicate(statement, _Known(pool), threshold, min_keywords)
        if position is not None:
            return pool[position]
    return None
