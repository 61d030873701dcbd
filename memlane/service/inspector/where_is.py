""" "Where is <text>?" for one context pack: the candidate that says it (and its fate),
else the user's memory that says it and why it was no candidate, else the fingerprint of
a purged memory, else the message it could have come from and the job that read it; one
sentence each."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from memlane.models.db import unit_of_work
from memlane.models.store.memories import fingerprints
from memlane.models.tables import Conversation, Job, MemoryRow, Message
from memlane.pipeline.dedup.fingerprints import fingerprint, matches
from memlane.pipeline.dedup.keywords import keywords
from memlane.service.inspector.fates import Candidate, why
from memlane.service.inspector.pack_view import PackView

# The share of the asked words a candidate must hold to count as saying it, when no
# candidate holds the text itself.
WORD_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class Answer:
    sentence: str
    candidate_id: str | None = None  # the pack's row it is about
    memory_id: str | None = None  # a memory of the user's, in the pack or not


def _says(text: str | None, asked: str, words: frozenset[str]) -> float:
    """How well `text` says what was asked: 1.0 when it holds the asked text, else the
    share of the asked keywords it holds."""
    if not text:
        return 0.0
    if asked.casefold() in text.casefold():
        return 1.0
    if not words:
        return 0.0
    return len(words & frozenset(keywords(text))) / len(words)


def _in_pack(view: PackView, asked: str, words: frozenset[str]) -> Candidate | None:
    scored = [(_says(row.text, asked, words), row) for row in view.candidates]
    best = max(scored, key=lambda pair: (pair[0], pair[1].included), default=None)
    return best[1] if best is not None and best[0] >= WORD_SHARE else None


def _not_a_candidate(row: MemoryRow, view: PackView) -> str:
    name = f"memory m{row.ref}"
    if row.status == "deleted":
        return f"It was no candidate: {name} says it, but it was forgotten."
    if row.status == "superseded":
        return f"It was no candidate: {name} says it, but it was superseded by {row.superseded_by}."
    if row.status == "quarantined":
        return f"It was no candidate: {name} says it, but it is quarantined."
    if row.created_at > view.assembled_at:
        return f"It could not be in this pack: {name} was stored after the pack was assembled."
    return (
        f"It was no candidate: {name} says it and is active, but the read for this "
        f"question ({view.query or 'no query'!s}) did not bring it among the "
        f"{len(view.candidates)} candidates (too little relevance to be read)."
    )


def where_is(
    url: str, view: PackView, asked: str, *, dedup_threshold: float, dedup_min_keywords: int
) -> Answer:
    asked = asked.strip()
    words = frozenset(keywords(asked))
    row = _in_pack(view, asked, words)
    if row is not None:
        sentence = why(row, used=view.used_tokens, budget=view.budget_tokens)
        memory = row.id if row.section == "memory" else None
        return Answer(sentence, candidate_id=row.id, memory_id=memory)
    user_id = view.user_id
    with unit_of_work(url) as session:
        stored = list(session.scalars(select(MemoryRow).where(MemoryRow.user_id == user_id)))
        best = max(stored, key=lambda m: _says(m.content, asked, words), default=None)
        if best is not None and _says(best.content, asked, words) >= WORD_SHARE:
            return Answer(_not_a_candidate(best, view), memory_id=best.id)
        secret, prints = fingerprints.read(session, user_id)
        if secret is not None and words:
            probe = fingerprint(secret, asked, words)
            if any(
                matches(probe, kept, threshold=dedup_threshold, min_keywords=dedup_min_keywords)
                for kept in prints
            ):
                return Answer(
                    "A memory saying it was purged: only its fingerprint is left, so it "
                    "is never learned or shown again until the fingerprints are lifted."
                )
        pattern = "%" + asked.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        message = session.execute(
            select(Message.conversation_id, Message.seq, Message.role)
            .join(Conversation, Conversation.id == Message.conversation_id)
            .where(Conversation.user_id == user_id, Message.content.ilike(pattern, escape="\\"))
            .order_by(Message.created_at.desc())
            .limit(1)
        ).one_or_none()
        if message is None:
            return Answer(f"Nothing memlane holds of {user_id} says {asked!r}.")
        conversation_id, seq, role = message
        job = session.execute(
            select(Job.id, Job.status)
            .where(
                Job.conversation_id == conversation_id,
                Job.window_start_seq <= seq,
                Job.window_end_seq >= seq,
            )
            .order_by(Job.created_at.desc())
            .limit(1)
        ).one_or_none()
    said = f"No memory says it; the {role} said it in message {seq} of {conversation_id}"
    if job is None:
        return Answer(f"{said}, which no extraction job has read yet.")
    job_id, status = job
    outcome = {
        "done": "which extracted no memory of it",
        "failed": "which failed",
    }.get(status, f"which is {status}")
    return Answer(f"{said}, read by job {job_id} ({outcome}).")
