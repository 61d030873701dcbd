"""Nothing said twice (assembly rule 4): whether an episode says little that the memories
already taken do not.

An episode summarises the messages the memories come from, and quotes them; when at
least SAID_AGAIN_SHARE of its keywords are among the keywords of the memories taken
before it, its line would spend budget on nothing new. The share is the dedup rule's: a
memory 60% the same as another is the same memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Set

from memlane.pipeline.assembly import context_format as fmt
from memlane.pipeline.dedup.keywords import keywords
from memlane.pipeline.records import EpisodeRecord, MemoryRecord

SAID_AGAIN_SHARE = 0.6


def memory_words(memories: Iterable[MemoryRecord]) -> set[str]:
    """The keywords of `memories` (read from their content when a record has none)."""
    said: set[str] = set()
    for memory in memories:
        said |= memory.keywords or keywords(memory.content)
    return said


def said_again(episode: EpisodeRecord, said: Set[str]) -> bool:
    """Whether `said` holds at least SAID_AGAIN_SHARE of the episode's line's keywords.
    Not cached: a cache keyed by an episode's text would keep it past a purge."""
    words = keywords(fmt.episode_text(episode))
    return bool(words) and len(words & said) >= SAID_AGAIN_SHARE * len(words)
