"""What the context assembler takes and gives: its input, its result and the context pack.

The context pack records every decision of one assembly (what was considered, what went
in, what was left out and why) so "why was this not in the prompt?" can be answered later.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, TypeAdapter

from memlane.pipeline.assembly.context_format import JsonDict, Selection, Style, as_json
from memlane.pipeline.ranking.scoring import Strategy, Weights
from memlane.pipeline.records import EpisodeRecord, Frozen, MemoryRecord, Procedure, SoulBlock, Tier

if TYPE_CHECKING:  # the wire schemas import this module, and a client has no tiktoken
    import tiktoken  # nor numpy (time_window's)

    from memlane.pipeline.ranking.time_window import TimeWindow

ItemSection = Literal["soul", "memory", "episode", "procedure"]
EventType = Literal["verified_item_dropped", "no_candidates_fit"]
DropReason = Literal[
    # left out before any budgeting (the memory's own state)
    "expired",
    "sensitive",
    "superseded",
    "quarantined",
    "deleted",
    # considered, did not fit
    "over_memory_share",  # fitted the budget but not the memories' share of it
    "over_budget",  # did not fit what was left of the whole budget
    "recount",  # removed when the final string's exact count came out over budget
    "redundant",  # an episode whose words the memories taken before it already say
]


@dataclass(frozen=True, slots=True, kw_only=True)
class AssemblyInput:
    """Everything one assembly depends on; the same input gives the same bytes.

    memories, soul_blocks, episodes and procedures are what the store read; the
    assembler filters them again (user, status, expiry, sensitivity) and never trusts
    the read. `relevance` maps an item's id (memory, episode or procedure) to its
    precomputed relevance to the query in [0, 1] (pipeline.ranking.relevance). `procedure_ids`,
    when given, are the procedures that match the query (computed by the caller, e.g.
    with stemmed keywords); otherwise a procedure matches when a lower-cased query word
    of 3+ letters is one of its keywords or a word of its name. `relevance_floor`: the
    share of the best relevance from which items are ranked by their composite score;
    those below it come after, by relevance (assembly rule 4). `style`: the format's
    style (context_format).
    """

    user_id: str
    query: str | None
    strategy: Strategy
    budget_tokens: int
    now: datetime
    encoding: tiktoken.Encoding
    retrieval_mode: str
    memories: Sequence[MemoryRecord] = ()
    relevance: Mapping[str, float] = field(default_factory=dict)
    # No defaults for the settings' values: memlane.config.settings is their one source.
    weights: Weights
    half_life_hours: float
    soul_blocks: Sequence[SoulBlock] = ()
    episodes: Sequence[EpisodeRecord] = ()
    procedures: Sequence[Procedure] = ()
    procedure_ids: frozenset[str] | None = None
    memory_share: float
    include_sensitive: bool = False
    relevance_floor: float
    style: Style = "default"
    # The time the query names (pipeline.ranking.time_window), which weighed the
    # relevance given: shown in the pack.
    time_window: TimeWindow | None = None
    # The agent asking (pipeline.scope): its items and the shared ones; None: shared only.
    agent_id: str | None = None
    # A memory's id → the memory said next in its conversation (its reply), as read: rule
    # 4 walks the replies of the lines taken that ask, and filters them as any memory.
    replies: Mapping[str, MemoryRecord] = field(default_factory=dict)


class ScoreComponents(Frozen):
    relevance: float
    importance: float
    recency: float
    frequency: float
    composite: float


class PackItem(Frozen):
    id: str
    ref: int | None = None  # the short id the context shows
    section: ItemSection
    tier: Tier | None = None
    score: float | None = None
    components: ScoreComponents | None = None
    tokens: int | None = None
    included: bool
    drop_reason: DropReason | None = None
    # "user" (shared) or "agent:<id>" (pipeline.scope.scope_label)
    scope: str = "user"
    # the memory that asked, when this one was walked as its reply (assembly rule 4)
    reply_to: str | None = None


class PackEvent(Frozen):
    type: EventType
    id: str | None = None


class PackTimeWindow(Frozen):
    """The window of time the query named ([start, end), UTC) and the words it was read
    from: the items stated outside it kept half their relevance (pipeline.ranking.time_window)."""

    start: datetime
    end: datetime
    phrase: str


class ContextPack(Frozen):
    pack_id: str
    user_id: str
    agent_id: str | None = None  # the agent it was assembled for (pipeline.scope)
    query: str | None
    assembled_at: datetime
    strategy: Strategy
    budget_tokens: int
    used_tokens: int
    items: list[PackItem] = Field(default_factory=list)
    dropped_count: int
    drop_reasons: dict[str, int] = Field(default_factory=dict)
    events: list[PackEvent] = Field(default_factory=list)
    retrieval_mode: str
    style: Style = "default"
    time_window: PackTimeWindow | None = None


PackData = dict[str, Any]


@dataclass(frozen=True, slots=True)
class AssembledContext:
    """One assembly's result. `pack_data` is the pack as plain data (the fields of
    ContextPack, `assembled_at` a datetime); the ContextPack model is only built when
    `pack` is first read, since validating hundreds of items costs more than choosing
    them, and the request path needs neither (the background writer stores `pack_json`)."""

    text: str  # the XML block, exactly as counted
    selection: Selection  # what went in, in document order
    pack_data: PackData
    included_memory_ids: list[str]  # in document order, for record_access
    # Tokens the ranked walk left: of the whole budget after rule 4's pool, of the
    # memories' share after rule 5's candidates (no later ranked item costing more could
    # have gone in: pipeline.assembly.exact_walk)
    room: int = 0
    # What rule 4's walk left once every item at or above the relevance floor was walked,
    # before the replies (None without that walk): pipeline.assembly.exact_walk's bound
    # for the items at the floor it did not walk.
    room_at_floor: int | None = None
    # What pipeline.assembly.walk_on needs to continue the walk (assembly._Walk), when it can
    walk: object = field(default=None, repr=False, compare=False)
    _pack: list[ContextPack] = field(default_factory=list, repr=False, compare=False)
    _json: list[JsonDict] = field(default_factory=list, repr=False, compare=False)

    @property
    def json(self) -> JsonDict:
        """The same selection as plain data (context_format.as_json), built when first
        read: the request path of an XML context does not need it."""
        if not self._json:
            self._json.append(as_json(self.selection))
        return self._json[0]

    @property
    def pack(self) -> ContextPack:
        if not self._pack:
            self._pack.append(ContextPack.model_validate(self.pack_data))
        return self._pack[0]

    @property
    def pack_id(self) -> str:
        return str(self.pack_data["pack_id"])


_DATETIME: TypeAdapter[datetime] = TypeAdapter(datetime)


def pack_json(data: PackData) -> dict[str, Any]:
    """The pack as JSON-ready data, equal to `ContextPack.model_dump(mode="json")` of
    it (test_assembly checks it): every other value already is plain JSON data."""
    window = data.get("time_window")
    if window is not None:
        window = {
            **window,
            "start": _DATETIME.dump_python(window["start"], mode="json"),
            "end": _DATETIME.dump_python(window["end"], mode="json"),
        }
    return {
        **data,
        "assembled_at": _DATETIME.dump_python(data["assembled_at"], mode="json"),
        "time_window": window,
    }
