"""Content-free fingerprints of purged memories, and the dedup rule over them.

A purged memory leaves its keywords and its normalised text each HMAC-SHA256'd with a
secret of its user: enough to recognise the same fact said again (the dedup rule of
memlane.pipeline.dedup.similarity, over the hashed sets), not enough to read it back. Without
the secret, a dictionary of likely words cannot be hashed to match; the secret goes
when the user is erased, and with it any meaning of the fingerprints.

The text hash is kept for every fingerprint (not only for those under the minimum
keywords): equal texts are duplicates whatever their keyword count, and a later change
of `MEMLANE_DEDUP_MIN_KEYWORDS` must not let a short fact through.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memlane.pipeline.dedup.keywords import Polarity, language_of, normalise, polarity
from memlane.pipeline.dedup.plan import duplicate_of
from memlane.pipeline.dedup.similarity import Statement, statements_duplicate
from memlane.pipeline.records import MemoryRecord


@dataclass(frozen=True, slots=True)
class Fingerprint:
    keywords: frozenset[str]  # hex HMACs
    text: str  # hex HMAC of the normalised text
    polarity: Polarity

    def statement(self) -> Statement:
        # the duplicate rule reads no topic (that is the conflict rule's)
        return Statement(self.text, self.keywords, frozenset(), self.polarity)


def _mac(secret: bytes, value: str) -> str:
    return hmac.new(secret, value.encode(), hashlib.sha256).hexdigest()


def fingerprint(secret: bytes, content: str, words: Iterable[str]) -> Fingerprint:
    words = frozenset(words)
    return Fingerprint(
        keywords=frozenset(_mac(secret, "k:" + w) for w in words),
        text=_mac(secret, "t:" + normalise(content)),
        polarity=polarity(content, language_of(words) if words else None),
    )


def matches(new: Fingerprint, stored: Fingerprint, *, threshold: float, min_keywords: int) -> bool:
    """The dedup rule itself (similarity.statements_duplicate) over hashed statements:
    equal hashes stand for equal texts and keywords, so the rule needs no copy."""
    return statements_duplicate(
        new.statement(), stored.statement(), threshold=threshold, min_keywords=min_keywords
    )


def suppressed(
    new: Fingerprint,
    stored: Sequence[Fingerprint],
    *,
    threshold: float,
    min_keywords: int,
) -> bool:
    return any(matches(new, s, threshold=threshold, min_keywords=min_keywords) for s in stored)


def suppressed_indices(
    statements: Sequence[tuple[str, frozenset[str]]],
    known: Sequence[MemoryRecord],
    secret: bytes | None,
    stored: Sequence[Fingerprint],
    *,
    threshold: float,
    min_keywords: int,
) -> list[int]:
    """The (content, keywords) statements a fingerprint keeps out: those that duplicate a
    fingerprint and no known memory. A known memory comes first (an active one is
    confirmed, a forgotten one drops it by dedup rule 0): a fact added by hand again after
    its purge is confirmed by later conversations, not suppressed."""
    if secret is None or not stored:
        return []
    return [
        index
        for index, (content, words) in enumerate(statements)
        if duplicate_of(content, words, known, threshold=threshold, min_keywords=min_keywords)
        is None
        and suppressed(
            fingerprint(secret, content, words),
            stored,
            threshold=threshold,
            min_keywords=min_keywords,
        )
    ]
