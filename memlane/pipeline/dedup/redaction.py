"""Redacting a removed fact out of the texts derived from it: episode summaries, topics and
outcomes, and the extraction a job keeps.

A purge (or a deleted conversation) removes a memory; the episodes of the conversations
that stated it may still say it in other words. They are redacted, not re-summarised:
re-summarising needs the LLM (a network call under the user's lock, a cost, and an answer
that may say the fact again), while redaction is deterministic, offline and checkable.

The unit is the sentence. A sentence *quotes* a removed fact when
- it uses one of the fact's distinctive keywords: a keyword that no memory the user
  keeps holds (the caller knows which, from the keyword index), so a word only the
  removed fact used cannot stay behind; or
- it shares at least QUOTE_SHARE of the fact's keywords, and at least two: the fact
  said in the user's other words.
A quoting sentence becomes MARKER (runs of markers collapse into one); a quoting topic
is dropped. Redaction errs toward removing too much: a purge is a promise.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memlane.pipeline.dedup.keywords import keywords, stem, tokens

MARKER = "[purged]"
QUOTE_SHARE = 0.5
# A sentence ends at . ! ? or … followed by space, or at a line break.
_SENTENCE_END = re.compile(r"(?<=[.!?\u2026])\s+|\n+")


@dataclass(frozen=True, slots=True)
class RemovedFact:
    """A removed memory's keywords, and those of them no kept memory of the user holds."""

    keywords: frozenset[str]
    distinctive: frozenset[str]

    @classmethod
    def of(cls, words: Iterable[str], *, kept: frozenset[str]) -> RemovedFact:
        """`kept`: the keywords the user's remaining memories hold."""
        found = frozenset(words)
        return cls(found, found - kept)


def quotes(words: frozenset[str], fact: RemovedFact) -> bool:
    """Whether a text with these keywords quotes the fact (the module's rule)."""
    shared = words & fact.keywords
    if shared & fact.distinctive:
        return True
    return len(shared) >= max(2, math.ceil(QUOTE_SHARE * len(fact.keywords)))


def _quotes_any(text: str, facts: Sequence[RemovedFact]) -> bool:
    words = keywords(text)
    return any(quotes(words, fact) for fact in facts)


def redact_text(text: str, facts: Sequence[RemovedFact]) -> str:
    """The text with each sentence that quotes a fact replaced by MARKER (a run of them
    by one); the text itself when none does."""
    if not facts:
        return text
    sentences = [s for s in _SENTENCE_END.split(text.strip()) if s]
    kept: list[str] = []
    changed = False
    for sentence in sentences:
        if _quotes_any(sentence, facts):
            changed = True
            if not kept or kept[-1] != MARKER:
                kept.append(MARKER)
        else:
            kept.append(sentence)
    return " ".join(kept) if changed else text


def redact_topics(topics: Sequence[str], facts: Sequence[RemovedFact]) -> list[str]:
    """The topics that quote no fact."""
    return [t for t in topics if not _quotes_any(t, facts)]


@dataclass(frozen=True, slots=True)
class EpisodeText:
    summary: str
    topics: tuple[str, ...]
    outcome: str | None


def may_quote(text: str, facts: Sequence[RemovedFact]) -> bool:
    """False when no word of `text` is a keyword of any fact, so no part of it can quote
    one: one pass over the whole text, before the sentence by sentence reading (a purge
    reads every episode of the user, and few quote the fact)."""
    wanted = frozenset().union(*(fact.keywords for fact in facts))
    return any(stem(token) in wanted for token in tokens(text))


def redact_episode(episode: EpisodeText, facts: Sequence[RemovedFact]) -> EpisodeText | None:
    """The episode redacted; None when nothing in it quotes a fact."""
    whole = "\n".join((episode.summary, *episode.topics, episode.outcome or ""))
    if not may_quote(whole, facts):
        return None
    redacted = EpisodeText(
        summary=redact_text(episode.summary, facts),
        topics=tuple(redact_topics(episode.topics, facts)),
        outcome=None if episode.outcome is None else redact_text(episode.outcome, facts),
    )
    return None if redacted == episode else redacted


def redact_extraction(
    extraction: Mapping[str, Any], facts: Sequence[RemovedFact]
) -> dict[str, Any] | None:
    """A job's kept extraction (Extraction as JSON) without the memories that quote a
    fact and with its episode redacted; None when nothing in it quotes one. A memory is
    dropped whole, not marked: a marker would be stored as a memory if the job's store
    stage is still to run."""
    memories = list(extraction.get("memories") or [])
    kept = [m for m in memories if not _quotes_any(str(m.get("content", "")), facts)]
    result = dict(extraction)
    changed = len(kept) != len(memories)
    result["memories"] = kept
    episode = extraction.get("episode")
    if isinstance(episode, Mapping):
        before = EpisodeText(
            str(episode.get("summary", "")),
            tuple(str(t) for t in episode.get("topics") or ()),
            None if episode.get("outcome") is None else str(episode["outcome"]),
        )
        after = redact_episode(before, facts)
        if after is not None:
            changed = True
            result["episode"] = {
                **episode,
                "summary": after.summary,
                "topics": list(after.topics),
                "outcome": after.outcome,
            }
    return result if changed else None
