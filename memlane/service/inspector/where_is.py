""" "Where is <text>?" for one context pack: the candidate that says it (and its fate),
else the user's memory that says it and why it was no candidate, else the fingerprint of
a purged memory, else the message it could have come from and the job that read it; one
sentence each.

A memory "says it" when it holds the asked text (any case), or else when it holds at
least WORD_SHARE of the text's keywords: both found by the store (a LIKE, then the
keyword index), never by reading every memory of a large user."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from memlane.models.db import unit_of_work
from memlane.models.store.memories import fingerprints
from memlane.models.store.reads import pack_texts
from memlane.models.tables import Conversation, Job, MemoryKeyword, MemoryRow, Message
from memlane.pipeline.dedup.fingerprints import fingerprint, matches
from memlane.pipeline.dedup.keywords import keywords
from memlane.service.inspector.fates import candidate, why
from memlane.service.inspector.pack_view import PackView

# The share of the asked keywords a text must hold to count as saying it, when it does
# not hold the asked text itself.
WORD_SHARE = 0.5
MOST = 50  # memories that say it, considered


@dataclass(frozen=True, slots=True)
class Answer:
    sentence: str
    candidate_id: str | None = None  # the pack's row it is about
    memory_id: str | None = None  # a memory of the user's, in the pack or not


@dataclass(frozen=True, slots=True)
class _Memory:
    id: str
    ref: int
    status: str
    created_at: datetime
    superseded_by: str | None


def _like(text: str) -> str:
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _says(text: str | None, asked: str, words: frozenset[str]) -> bool:
    if not text:
        return False
    if asked.casefold() in text.casefold():
        return True
    return bool(words) and len(words & frozenset(keywords(text))) >= _enough(words)


def _enough(words: frozenset[str]) -> int:
    return max(1, math.ceil(WORD_SHARE * len(words)))


def _memories_saying(
    session: Session, user_id: str, asked: str, words: frozenset[str]
) -> list[_Memory]:
    """The user's memories that say it, best first: those holding the text, else those
    holding the most of its keywords."""
    columns = (
        MemoryRow.id,
        MemoryRow.ref,
        MemoryRow.status,
        MemoryRow.created_at,
        MemoryRow.superseded_by,
    )
    rows = session.execute(
        select(*columns)
        .where(MemoryRow.user_id == user_id, MemoryRow.content.ilike(_like(asked), escape="\\"))
        .order_by(MemoryRow.ref.desc())
        .limit(MOST)
    ).all()
    if not rows and words:
        held = func.count().label("held")
        ranked = (
            select(MemoryKeyword.memory_id, held)
            .where(MemoryKeyword.user_id == user_id, MemoryKeyword.keyword.in_(sorted(words)))
            .group_by(MemoryKeyword.memory_id)
            .having(func.count() >= _enough(words))
            .order_by(held.desc())
            .limit(MOST)
            .subquery()
        )
        rows = session.execute(
            select(*columns)
            .join(ranked, ranked.c.memory_id == MemoryRow.id)
            .order_by(ranked.c.held.desc(), MemoryRow.ref.desc())
        ).all()
    return [_Memory(*row) for row in rows]


def _in_pack(
    session: Session,
    view: PackView,
    saying: Sequence[_Memory],
    asked: str,
    words: frozenset[str],
) -> Answer | None:
    """The pack's candidate that says it (an included one first), with its fate."""
    items: Mapping[str, Mapping[str, Any]] = {str(i["id"]): i for i in view.items}
    found = [items[m.id] for m in saying if m.id in items]
    others = [i for i in view.items if i.get("section") != "memory"]  # a few at most
    texts = pack_texts.item_texts(session, view.user_id, [*found, *others])
    found += [i for i in others if _says(texts.get(str(i["id"])), asked, words)]
    if not found:
        return None
    item = max(found, key=lambda i: bool(i.get("included")))
    row = candidate(item, texts.get(str(item["id"])), view.floor)
    sentence = why(row, used=view.used_tokens, budget=view.budget_tokens)
    return Answer(sentence, row.id, row.id if row.section == "memory" else None)


def _not_a_candidate(memory: _Memory, view: PackView) -> str:
    name = f"memory m{memory.ref}"
    if memory.status == "deleted":
        return f"It was no candidate: {name} says it, but it was forgotten."
    if memory.status == "superseded":
        return f"It was no candidate: {name} says it, but {memory.superseded_by} superseded it."
    if memory.status == "quarantined":
        return f"It was no candidate: {name} says it, but it is quarantined."
    if memory.created_at > view.assembled_at:
        return f"It could not be in this pack: {name} was stored after the pack was assembled."
    return (
        f"It was no candidate: {name} says it and is active, but the read for this "
        f"question ({view.query or 'no query'!s}) did not bring it among the "
        f"{view.total} candidates (too little relevance to be read)."
    )


def _purged(session: Session, user_id: str, asked: str, words: frozenset[str], **rule: Any) -> bool:
    secret, prints = fingerprints.read(session, user_id)
    if secret is None or not words:
        return False
    probe = fingerprint(secret, asked, words)
    return any(matches(probe, kept, **rule) for kept in prints)


def _from_messages(session: Session, user_id: str, asked: str) -> str:
    message = session.execute(
        select(Message.conversation_id, Message.seq, Message.role)
        .join(Conversation, Conversation.id == Message.conversation_id)
        .where(Conversation.user_id == user_id, Message.content.ilike(_like(asked), escape="\\"))
        .order_by(Message.created_at.desc())
        .limit(1)
    ).one_or_none()
    if message is None:
        return f"Nothing memlane holds of {user_id} says {asked!r}."
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
        return f"{said}, which no extraction job has read yet."
    job_id, status = job
    outcome = {"done": "which extracted no memory of it", "failed": "which failed"}.get(
        status, f"which is {status}"
    )
    return f"{said}, read by job {job_id} ({outcome})."


def where_is(
    url: str, view: PackView, asked: str, *, dedup_threshold: float, dedup_min_keywords: int
) -> Answer:
    asked = asked.strip()
    words = frozenset(keywords(asked))
    user_id = view.user_id
    with unit_of_work(url) as session:
        saying = _memories_saying(session, user_id, asked, words)
        answer = _in_pack(session, view, saying, asked, words)
        if answer is not None:
            return answer
        if saying:
            return Answer(_not_a_candidate(saying[0], view), memory_id=saying[0].id)
        rule = {"threshold": dedup_threshold, "min_keywords": dedup_min_keywords}
        if _purged(session, user_id, asked, words, **rule):
            return Answer(
                "A memory saying it was purged: only its fingerprint is left, so it "
                "is never learned or shown again until the fingerprints are lifted."
            )
        return Answer(_from_messages(session, user_id, asked))
