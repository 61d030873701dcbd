"""The assembler's parts (pipeline.assembly.assembler): an item as it is walked (its line, cost,
score and decision), the running token account, the pack built from the items, and
what a rule-4 walk leaves for pipeline.assembly.walk_on to go on with."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Generic, TypeVar

import tiktoken

from memlane.pipeline.assembly import context_format as fmt
from memlane.pipeline.assembly.coverage import memory_words, said_again
from memlane.pipeline.assembly.records import (
    AssemblyInput,
    DropReason,
    ItemSection,
    PackData,
    PackEvent,
)
from memlane.pipeline.dedup.keywords import stem
from memlane.pipeline.ranking.scoring import RankedMemory, ScoreBreakdown, rank
from memlane.pipeline.records import EpisodeRecord, MemoryRecord, Procedure, SoulBlock, Tier
from memlane.pipeline.scope import scope_label

_PACK_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "memlane:context-pack")
_R = TypeVar("_R", SoulBlock, MemoryRecord, EpisodeRecord, Procedure)


@lru_cache(maxsize=65_536)
def count_line(encoding: tiktoken.Encoding, line: str) -> int:
    return len(encoding.encode_ordinary(line))


def forget_rendered_texts() -> None:
    """Empty the caches that hold items' texts (rendered lines, their token counts, the
    stems of their words): what a purge, a conversation delete or an erasure removed
    leaves no copy in this process. They fill again as assemblies run."""
    fmt.forget_memory_lines()
    count_line.cache_clear()
    stem.cache_clear()


@dataclass(slots=True)
class Entry(Generic[_R]):
    """One considered item: its record, rendered line, cost, score and the decision."""

    record: _R
    id: str
    ref: int | None
    section: fmt.SectionName
    kind: ItemSection
    line: str
    tokens: int
    score: float | None = None  # the strategy's value for memories, the composite in a pool
    breakdown: ScoreBreakdown | None = None
    included: bool = False
    drop_reason: DropReason | None = None
    tier: Tier | None = None  # a memory's; read for every entry, so kept, not derived
    reply_to: str | None = None  # the asking memory's id, for a reply (assembly rule 4)


AnyEntry = Entry[SoulBlock] | Entry[MemoryRecord] | Entry[EpisodeRecord] | Entry[Procedure]


def rank_for(
    request: AssemblyInput,
    memories: Sequence[MemoryRecord],
    relevance: Mapping[str, float],
    *,
    ordered: bool,
) -> list[RankedMemory]:
    """`memories` scored by `request`'s strategy, clock and weights (scoring.rank), with
    `relevance` (the request's own, or the relevance of items added to a walk)."""
    return rank(
        memories,
        strategy=request.strategy,
        now=request.now,
        relevance=relevance,
        weights=request.weights,
        half_life_hours=request.half_life_hours,
        ordered=ordered,
    )


def memory_entry(
    item: RankedMemory, encoding: tiktoken.Encoding, style: fmt.Style
) -> Entry[MemoryRecord]:
    m = item.memory
    line = fmt.memory_line(m, style)
    return Entry(
        m,
        m.id,
        m.ref,
        "memories",
        "memory",
        line,
        count_line(encoding, line),
        item.score,
        item.breakdown,
        tier=m.tier,
    )


class Account:
    """Running token count: the root, each non-empty section's wrapper, each line."""

    def __init__(self, encoding: tiktoken.Encoding, user_id: str) -> None:
        self.used = count_line(encoding, fmt.root_open(user_id)) + count_line(
            encoding, fmt.ROOT_CLOSE
        )
        self.section_used: dict[fmt.SectionName, int] = {}
        # the memories taken, and the keywords of the first `_heard` of them (read only
        # when an episode is walked: most walks take memories alone)
        self.memories_taken: list[MemoryRecord] = []
        self.said: set[str] = set()
        self._heard = 0
        self._wrapper = {
            name: count_line(encoding, fmt.section_open(name))
            + count_line(encoding, fmt.section_close(name))
            for name in fmt.SECTION_ORDER
        }

    def copy(self) -> Account:
        twin = object.__new__(Account)
        twin.used, twin.section_used, twin._wrapper = (
            self.used,
            dict(self.section_used),
            self._wrapper,
        )
        twin.memories_taken, twin.said, twin._heard = (
            list(self.memories_taken),
            set(self.said),
            self._heard,
        )
        return twin

    def cost(self, entry: AnyEntry) -> int:
        """Tokens the entry adds: its line, plus its section's wrapper if it is the first."""
        return entry.tokens + (
            0 if entry.section in self.section_used else self._wrapper[entry.section]
        )

    def take(self, entry: AnyEntry) -> None:
        cost = self.cost(entry)
        self.used += cost
        self.section_used[entry.section] = self.section_used.get(entry.section, 0) + cost
        entry.included = True
        record = entry.record
        if isinstance(record, MemoryRecord):
            self.memories_taken.append(record)

    def says_again(self, entry: AnyEntry) -> bool:
        """Whether `entry` is an episode that says little the memories taken have not
        (pipeline.assembly.coverage)."""
        record = entry.record
        if not isinstance(record, EpisodeRecord) or not self.memories_taken:
            return False
        self.said |= memory_words(self.memories_taken[self._heard :])
        self._heard = len(self.memories_taken)
        return said_again(record, self.said)


@dataclass(frozen=True, slots=True)
class Walk:
    """A rule-4 walk as it ended, for pipeline.assembly.walk_on to go on with: its request, what
    the account holds, the entries by section (candidates, episodes and procedures in
    the pool's order), the memories it saw, its events but `no_candidates_fit`, its
    pack's items, the pool's best relevance and its last entry's key."""

    request: AssemblyInput
    budget: int
    account: Account
    soul: list[Entry[SoulBlock]]
    pinned: list[Entry[MemoryRecord]]
    verified: list[Entry[MemoryRecord]]
    candidates: list[Entry[MemoryRecord]]
    episodes: list[Entry[EpisodeRecord]]
    procedures: list[Entry[Procedure]]
    usable: list[MemoryRecord]  # the memories it saw: usable, and left out with the reason
    excluded: list[tuple[MemoryRecord, DropReason]]
    events: list[PackEvent]
    items: list[dict[str, object]]
    best: float
    last: tuple[bool, float, float, int, str] | None


def build_pack(
    request: AssemblyInput,
    budget: int,
    used: int,
    text: str,
    considered: Sequence[AnyEntry],
    excluded: Sequence[tuple[MemoryRecord, DropReason]],
    events: list[PackEvent],
) -> PackData:
    """The context pack, as plain data with every field of ContextPack and PackItem
    (so it equals the model's dump)."""
    items = [*map(pack_item, considered), *(excluded_item(m, reason) for m, reason in excluded)]
    return pack_of(request, budget, used, text, items, events)


def pack_item(e: AnyEntry) -> dict[str, object]:
    components: dict[str, float] | None = None
    b = e.breakdown
    if b is not None:
        components = {
            "relevance": b.relevance,
            "importance": b.importance,
            "recency": b.recency,
            "frequency": b.frequency,
            "composite": b.composite,
        }
    return {
        "id": e.id,
        "ref": e.ref,
        "section": e.kind,
        "tier": e.tier,
        "score": None if e.score is None else float(e.score),
        "components": components,
        "tokens": e.tokens,
        "included": e.included,
        "drop_reason": e.drop_reason,
        "scope": scope_label(
            e.record.agent_id if isinstance(e.record, MemoryRecord | EpisodeRecord) else None
        ),
        "reply_to": e.reply_to,
    }


def excluded_item(m: MemoryRecord, reason: DropReason) -> dict[str, object]:
    return {
        "id": m.id,
        "ref": m.ref,
        "section": "memory",
        "tier": m.tier,
        "score": None,
        "components": None,
        "tokens": None,
        "included": False,
        "drop_reason": reason,
        "scope": scope_label(m.agent_id),
        "reply_to": None,
    }


def pack_of(
    request: AssemblyInput,
    budget: int,
    used: int,
    text: str,
    items: list[dict[str, object]],
    events: list[PackEvent],
) -> PackData:
    """The pack of `items`. Its id is a uuid5 of what identifies the call and of the
    text, so the same call gives the same id and a different result a different one."""
    dropped = 0
    reasons: Counter[str] = Counter()
    for item in items:
        if not item["included"]:
            dropped += 1
            reason = item["drop_reason"]
            if reason is not None:
                reasons[str(reason)] += 1
    key = json.dumps(
        [
            request.user_id,
            request.query,
            request.now.isoformat(),
            request.strategy,
            request.style,
            budget,
            hashlib.sha256(text.encode()).hexdigest(),
            # only when named: a call without an agent keeps the id it always had
            *([] if request.agent_id is None else [request.agent_id]),
        ]
    )
    return {
        "pack_id": f"pack_{uuid.uuid5(_PACK_NAMESPACE, key).hex}",
        "user_id": request.user_id,
        "agent_id": request.agent_id,
        "query": request.query,
        "assembled_at": request.now,
        "strategy": request.strategy,
        "budget_tokens": budget,
        "used_tokens": used,
        "items": items,
        "dropped_count": dropped,
        "drop_reasons": dict(sorted(reasons.items())),
        "events": [{"type": event.type, "id": event.id} for event in events],
        "retrieval_mode": request.retrieval_mode,
        "style": request.style,
        "time_window": None
        if request.time_window is None
        else {
            "start": request.time_window.start,
            "end": request.time_window.end,
            "phrase": request.time_window.phrase,
        },
    }
