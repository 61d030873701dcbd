"""What happened to each candidate of a context pack, in words: the pack records a
drop reason code per item (memlane.pipeline.assembly.records.DropReason); the inspector
shows a fate and says in one sentence why."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The fates a pack's table filters by; each drop reason belongs to one.
INCLUDED = "included"
BUDGET = "dropped for budget"
SHARE = "over the memories' share"
FLOOR = "below the floor"
FILTERED = "filtered"

_FILTERED_BECAUSE = {
    "expired": "it had expired",
    "sensitive": "it is marked sensitive and the context did not ask for sensitive items",
    "superseded": "a newer memory superseded it",
    "quarantined": "it is quarantined",
    "deleted": "it was forgotten",
}


@dataclass(frozen=True, slots=True)
class Candidate:
    """One row of a pack's table."""

    id: str
    ref: int | None
    section: str
    tier: str | None
    text: str | None  # as stored now; None once purged or erased
    relevance: float | None
    composite: float | None
    tokens: int | None
    included: bool
    reason: str | None  # the pack's drop reason code
    fate: str

    @property
    def label(self) -> str:
        """How the context names it: m12 for a memory's ref 12, else its id."""
        prefix = {"memory": "m", "episode": "e", "procedure": "p"}.get(self.section)
        return f"{prefix}{self.ref}" if prefix and self.ref is not None else self.id


def floor_of(items: list[Mapping[str, Any]], relevance_floor: float) -> float | None:
    """The relevance below which a memory ranked after every memory above it (assembly
    rule 4: a share of the best relevance); None when nothing had a relevance."""
    best = max(
        (float((item.get("components") or {}).get("relevance") or 0.0) for item in items),
        default=0.0,
    )
    return relevance_floor * best if best > 0 else None


def fate_of(item: Mapping[str, Any], floor: float | None) -> str:
    """An item's fate, from its drop reason (and, for a budget drop, the floor)."""
    if item.get("included"):
        return INCLUDED
    reason = item.get("drop_reason")
    if reason in _FILTERED_BECAUSE:
        return f"{FILTERED}: {reason}"
    if reason == "over_memory_share":
        return SHARE
    relevance = (item.get("components") or {}).get("relevance")
    if floor is not None and relevance is not None and float(relevance) < floor:
        return FLOOR
    return BUDGET


def candidate(item: Mapping[str, Any], text: str | None, floor: float | None) -> Candidate:
    parts = item.get("components") or {}
    relevance = parts.get("relevance")
    return Candidate(
        id=str(item["id"]),
        ref=item.get("ref"),
        section=str(item.get("section", "memory")),
        tier=item.get("tier"),
        text=text,
        relevance=None if relevance is None else float(relevance),
        composite=parts.get("composite", item.get("score")),
        tokens=item.get("tokens"),
        included=bool(item.get("included")),
        reason=item.get("drop_reason"),
        fate=fate_of(item, floor),
    )


def why(row: Candidate, *, used: int, budget: int) -> str:
    """One sentence: why this candidate was or was not in the pack."""
    name = f"{row.section} {row.label}"
    if row.included:
        tier = f" ({row.tier})" if row.tier else ""
        return f"It was in the pack: {name}{tier} took {row.tokens or 0} tokens of {budget}."
    if row.reason in _FILTERED_BECAUSE:
        return f"It was left out before budgeting: {_FILTERED_BECAUSE[row.reason]}."
    cost = f"it needed {row.tokens} tokens" if row.tokens else "it did not fit"
    if row.fate == SHARE:
        return (
            f"It was dropped: {cost}, more than was left of the memories' share of the "
            f"budget ({used} of {budget} tokens used)."
        )
    if row.reason == "recount":
        return "It was dropped when the final text's exact count came out over the budget."
    score = f"composite {row.composite:.3f}" if row.composite is not None else "its score"
    if row.fate == FLOOR:
        return (
            f"It was dropped: its relevance {row.relevance:.3f} was below the floor, so it "
            f"ranked after every more relevant item and {cost} when its turn came "
            f"({used} of {budget} tokens used)."
        )
    return (
        f"It was dropped for budget: with {score} it ranked below what went in, and {cost} "
        f"when its turn came ({used} of {budget} tokens used)."
    )
