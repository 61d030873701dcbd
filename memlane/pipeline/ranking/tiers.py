"""How a memory earns the `verified` tier without a person marking it.

A candidate becomes verified once it is confirmed: seen in at least 3 distinct pieces of
evidence (access_count ≥ 3), stated by the user (confidence ≥ 0.9) and not minor
(importance ≥ 0.5). A person can also verify (or pin) any memory through the API, the CLI
or the facade. Verified memories are dropped from a context only as a last resort.
Promotion never demotes: pinned stays pinned, and nothing goes back to candidate here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from memlane.pipeline.records import MemoryRecord


@dataclass(frozen=True, slots=True)
class VerificationRule:
    min_confirmations: int = 3
    min_confidence: float = 0.9
    min_importance: float = 0.5


def earns_verified(
    *,
    tier: str,
    access_count: int,
    confidence: float,
    importance: float,
    rule: VerificationRule = VerificationRule(),
) -> bool:
    return (
        tier == "candidate"
        and access_count >= rule.min_confirmations
        and confidence >= rule.min_confidence
        and importance >= rule.min_importance
    )


def promotions(
    bumps: Iterable[tuple[str, int, float, float]],
    known: Mapping[str, MemoryRecord],
    *,
    rule: VerificationRule = VerificationRule(),
) -> list[str]:
    """Ids of known memories that a batch of bumps (memory_id, increment, new importance,
    new confidence) makes verified, in id order."""
    promoted = []
    for memory_id, increment, importance, confidence in bumps:
        record = known.get(memory_id)
        if record is None:
            continue
        if earns_verified(
            tier=record.tier,
            access_count=record.access_count + increment,
            confidence=confidence,
            importance=importance,
            rule=rule,
        ):
            promoted.append(memory_id)
    return sorted(promoted)
