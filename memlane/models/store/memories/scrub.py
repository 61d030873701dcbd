"""What a removed memory leaves behind, taken out: the user's episodes that quote it
(redacted, pipeline/dedup/redaction.py), the extractions jobs still keep (its memory
dropped, their episode redacted), and the context packs that showed it or a redacted
episode, or whose query quotes it (deleted: a pack's only text is its query, and the ids
it names are what it showed). Called by a purge and by deleting a conversation, in their
transaction, after the memories themselves are gone from the keyword index, under the
user's lock.

A redacted episode loses its vector (it embedded the old summary); `embed`, when given,
embeds the redacted summaries at once (the store stage's embedder: the caller has it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sqlalchemy import Text, cast, delete, or_, select, update
from sqlalchemy.orm import Session

from memlane.models.store.users import change_feed as changes
from memlane.models.tables import ContextPackRow, EpisodeRow, Job, MemoryKeywordCount
from memlane.pipeline.dedup.keywords import keywords as keywords_of
from memlane.pipeline.dedup.redaction import (
    EpisodeText,
    RemovedFact,
    quotes,
    redact_episode,
    redact_extraction,
)
from memlane.pipeline.records import ExtractedEpisode

Embed = Callable[[list[str]], Sequence[Sequence[float]]]


@dataclass
class Scrubbed:
    episodes: list[str] = field(default_factory=list)  # ids of the redacted episodes
    jobs: int = 0  # kept extractions redacted
    packs: int = 0  # context packs deleted


def removed_facts(
    session: Session, user_id: str, word_sets: Sequence[Sequence[str]]
) -> list[RemovedFact]:
    """Each removed memory's keywords as a RemovedFact: its distinctive ones are those
    no memory the user still has holds (read from the keyword counts, which the removal
    has already uncounted)."""
    every = sorted({w for words in word_sets for w in words})
    kept: set[str] = set()
    for start in range(0, len(every), 500):
        kept.update(
            session.scalars(
                select(MemoryKeywordCount.keyword).where(
                    MemoryKeywordCount.user_id == user_id,
                    MemoryKeywordCount.keyword.in_(every[start : start + 500]),
                )
            )
        )
    return [RemovedFact.of(words, kept=frozenset(kept)) for words in word_sets if words]


def scrub(
    session: Session,
    user_id: str,
    facts: Sequence[RemovedFact],
    *,
    item_ids: Sequence[str],
    embed: Embed | None = None,
    embedding_model: str | None = None,
) -> Scrubbed:
    """Take the removed memories (said by `facts`) out of the user's episodes, kept
    extractions and context packs; what was done. `item_ids`: the removed items
    (memories, episodes), whose packs go."""
    done = Scrubbed()
    if not facts and not item_ids:
        return done
    done.episodes = _redact_episodes(session, user_id, facts, embed, embedding_model)
    done.jobs = _redact_extractions(session, user_id, facts)
    done.packs = _delete_packs(session, user_id, facts, [*item_ids, *done.episodes])
    return done


def _redact_episodes(
    session: Session,
    user_id: str,
    facts: Sequence[RemovedFact],
    embed: Embed | None,
    embedding_model: str | None,
) -> list[str]:
    if not facts:
        return []
    rows = session.execute(
        select(EpisodeRow.id, EpisodeRow.summary, EpisodeRow.topics, EpisodeRow.outcome).where(
            EpisodeRow.user_id == user_id
        )
    )
    redacted: dict[str, EpisodeText] = {}
    for episode_id, summary, topics, outcome in rows:
        after = redact_episode(EpisodeText(summary, tuple(topics or ()), outcome), facts)
        if after is not None:
            redacted[episode_id] = after
    if not redacted:
        return []
    ids = sorted(redacted)
    vectors = embed([redacted[i].summary for i in ids]) if embed is not None else None
    stamp = changes.stamp(session, user_id)
    for index, episode_id in enumerate(ids):
        episode = redacted[episode_id]
        vector = list(vectors[index]) if vectors is not None else None
        session.execute(
            update(EpisodeRow)
            .where(EpisodeRow.id == episode_id)
            .values(
                summary=episode.summary,
                topics=list(episode.topics),
                outcome=episode.outcome,
                change_seq=stamp,
                embedding=vector,
                embedding_model=embedding_model if vector is not None else None,
                embedding_dim=len(vector) if vector is not None else None,
            )
        )
    return ids


def _redact_extractions(session: Session, user_id: str, facts: Sequence[RemovedFact]) -> int:
    """Jobs keep their extraction only until stored (jobs.done drops it) or while they
    failed at the store stage; those left are redacted."""
    if not facts:
        return 0
    rows = session.execute(
        select(Job.id, Job.extraction).where(Job.user_id == user_id, Job.extraction.is_not(None))
    ).all()
    redacted = 0
    for job_id, extraction in rows:
        if not isinstance(extraction, dict):
            continue  # a JSON null
        after = redact_extraction(extraction, facts)
        if after is not None:
            session.execute(update(Job).where(Job.id == job_id).values(extraction=after))
            redacted += 1
    return redacted


def _delete_packs(
    session: Session, user_id: str, facts: Sequence[RemovedFact], item_ids: Sequence[str]
) -> int:
    """Delete the user's context packs that name any of the items, or whose query quotes
    a fact."""
    body = cast(ContextPackRow.body, Text)
    doomed: set[str] = set()
    for start in range(0, len(item_ids), 100):
        names = [body.contains(item_id, autoescape=True) for item_id in item_ids[start:][:100]]
        doomed.update(
            session.scalars(
                select(ContextPackRow.id).where(ContextPackRow.user_id == user_id, or_(*names))
            )
        )
    if facts:
        queries = session.execute(
            select(ContextPackRow.id, ContextPackRow.body["query"].as_string()).where(
                ContextPackRow.user_id == user_id
            )
        )
        for pack_id, query in queries:
            words = keywords_of(query) if query else frozenset()
            if words and any(quotes(words, fact) for fact in facts):
                doomed.add(pack_id)
    ids = sorted(doomed)
    for start in range(0, len(ids), 500):
        session.execute(delete(ContextPackRow).where(ContextPackRow.id.in_(ids[start:][:500])))
    return len(ids)


def redact_said_again(
    session: Session,
    user_id: str,
    episode: ExtractedEpisode,
    suppressed: Sequence[frozenset[str]],
) -> ExtractedEpisode | None:
    """The episode a store job is about to save, redacted of the purged facts it said
    again (the keywords of the extracted memories a fingerprint kept out); None when it
    quotes none of them. A purged fact said again is not learned, nor summarised."""
    facts = removed_facts(session, user_id, [sorted(words) for words in suppressed])
    after = redact_episode(
        EpisodeText(episode.summary, tuple(episode.topics), episode.outcome), facts
    )
    if after is None:
        return None
    return ExtractedEpisode(summary=after.summary, topics=list(after.topics), outcome=after.outcome)
