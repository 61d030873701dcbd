"""How a memory earns the `verified` tier without a person marking it.

A candidate becomes verified once it is confirmed: seen in at least 3 distinct pieces of
evidence (access_count ≥ 3), stated by the user (confidence ≥ 0.9), not minor
(importance ≥ 0.5), and saying something: at least 2 of its keywords are not words of
social formulae (PLEASANTRY_WORDS: thanks, bye, see you, take care, great, ...).

Why the last rule: repetition is what a pleasantry is made of. "Take care, bye!" and
"Thanks, see you later!" are said in every conversation, so they earn their
confirmations faster than any fact, and a verified memory is forced into every context
of its user (dropped only as a last resort). Count alone cannot tell a fact confirmed
three times from a formula said three times; what the memory says can.

A person can also verify (or pin) any memory through the API, the CLI or the facade.
Verified memories are dropped from a context only as a last resort. Promotion never
demotes: pinned stays pinned, and nothing goes back to candidate here.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from memlane.pipeline.dedup.keywords import keywords
from memlane.pipeline.records import MemoryRecord

# Words of greetings, thanks, farewells and stock praise: what a memory says beside them
# is its content (module docstring). Keywords as the dedup rule makes them (stemmed), so
# they compare with a memory's own.
PLEASANTRY_WORDS = keywords(
    "thanks thank you bye goodbye farewell take care see later soon talk chat catch "
    "hi hello hey morning night evening good great nice awesome cool glad happy welcome "
    "cheers pleasure wonderful amazing fun again okay yes yeah wow haha lol congrats "
    "congratulations sounds wish luck hear"
)


@dataclass(frozen=True, slots=True)
class VerificationRule:
    min_confirmations: int = 3
    min_confidence: float = 0.9
    min_importance: float = 0.5
    min_content_keywords: int = 2


def says_something(memory_keywords: Collection[str], rule: VerificationRule) -> bool:
    """At least `rule.min_content_keywords` keywords beyond social formulae."""
    content = [word for word in memory_keywords if word not in PLEASANTRY_WORDS]
    return len(content) >= rule.min_content_keywords


def earns_verified(
    *,
    tier: str,
    access_count: int,
    confidence: float,
    importance: float,
    memory_keywords: Collection[str],
    rule: VerificationRule = VerificationRule(),
) -> bool:
    return (
        tier == "candidate"
        and access_count >= rule.min_confirmations
        and confidence >= rule.min_confidence
        and importance >= rule.min_importance
        and says_something(memory_keywords, rule)
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
            memory_keywords=record.keywords or keywords(record.content),
            rule=rule,
        ):
            promoted.append(memory_id)
    return sorted(promoted)
