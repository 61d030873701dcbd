"""Conversations and their messages: stored durably, each message once."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, fields
from datetime import datetime
from functools import lru_cache
from typing import Any, cast

from sqlalchemy import Table, bindparam, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from memlane.models.schemas import TranscriptIn
from memlane.models.store.metadata_writes import updated_metadata
from memlane.models.tables import Conversation, Message
from memlane.pipeline.errors import TranscriptError
from memlane.pipeline.language.detect import detect_language
from memlane.pipeline.records import StoredMessage

_MESSAGES = cast(Table, Message.__table__)


@dataclass(frozen=True, slots=True)
class SavedTranscript:
    conversation_id: str
    user_id: str
    stored: int
    skipped: int
    message_count: int
    final: bool
    extracted_to_seq: int
    assistant_seqs: list[int]  # of all the conversation's messages, in order


def _sha(role: str, content: str) -> str:
    return hashlib.sha256(f"{role}\x00{content}".encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class _Locked:
    id: str
    user_id: str
    message_count: int
    extracted_to_seq: int
    final: bool
    last_message_at: datetime
    agent_id: str | None


_CONVERSATIONS = cast(Table, Conversation.__table__)
_C = _CONVERSATIONS.c


@lru_cache(maxsize=4)
def _upsert_conversation(dialect: str) -> Any:
    """Create the conversation row, or lock the one there (a no-op DO UPDATE takes the
    row lock, as SELECT … FOR UPDATE would), returning it: one round trip, not two."""
    insert = pg_insert if dialect == "postgresql" else sqlite_insert
    statement = insert(_CONVERSATIONS)
    return statement.on_conflict_do_update(
        index_elements=[_C.id],
        set_={"final": _C.final, "metadata": updated_metadata(dialect, statement.excluded)},
    ).returning(*(_C[f.name] for f in fields(_Locked)))


_UPDATE_COUNTS = (
    update(_CONVERSATIONS)
    .where(_C.id == bindparam("b_id"))
    .values(
        message_count=bindparam("b_message_count"),
        assistant_count=bindparam("b_assistant_count"),
        last_message_at=bindparam("b_last_message_at", type_=_C.last_message_at.type),
        final=bindparam("b_final"),
    )
)


def _lock_conversation(session: Session, transcript: TranscriptIn, now: datetime) -> _Locked:
    """Create the conversation row if needed, locked so two enqueues of one conversation
    serialise (PostgreSQL row lock; SQLite has a single writer)."""
    values = {
        "id": transcript.conversation_id,
        "user_id": transcript.user_id,
        "agent_id": transcript.agent_id,
        "message_count": 0,
        "assistant_count": 0,
        "extracted_to_seq": -1,
        "final": False,
        "created_at": now,
        "last_message_at": now,
        "metadata": transcript.metadata,
    }
    row = session.execute(_upsert_conversation(session.get_bind().dialect.name), values).one()
    conversation = _Locked(*row)
    if conversation.user_id != transcript.user_id:
        raise TranscriptError(
            f"conversation {transcript.conversation_id!r} belongs to another user; "
            "a conversation id is unique across users"
        )
    if conversation.agent_id != transcript.agent_id:
        # what was learned from it already belongs to the agent it was first sent with
        raise TranscriptError(
            f"conversation {transcript.conversation_id!r} is with "
            f"{_agent(conversation.agent_id)}, not {_agent(transcript.agent_id)}; a "
            "conversation keeps the agent_id it was first sent with"
        )
    return conversation


def _agent(agent_id: str | None) -> str:
    return "no agent" if agent_id is None else f"agent {agent_id!r}"


def save_transcript(
    session: Session, transcript: TranscriptIn, *, now: datetime
) -> SavedTranscript:
    """Store the transcript's new messages. Raises TranscriptError (and the caller's
    transaction rolls back, so nothing is written) when it contradicts what is stored."""
    conversation = _lock_conversation(session, transcript, now)
    existing = session.execute(
        select(Message.seq, Message.external_id, Message.content_sha256, Message.role).where(
            Message.conversation_id == conversation.id
        )
    ).all()
    assistant = [row.seq for row in existing if row.role == "assistant"]
    # A purged message's hash is '' (models/store/users/retention.py): its position is known,
    # its text is not, so whatever is sent at that position is taken as it.
    by_seq = {row.seq: row.content_sha256 for row in existing}
    by_external = {row.external_id: row.content_sha256 for row in existing if row.external_id}
    with_ids = transcript.messages[0].id is not None
    if existing and with_ids != bool(by_external):
        raise TranscriptError(
            f"conversation {conversation.id!r} was started "
            + ("with" if by_external else "without")
            + " message ids; keep sending it the same way"
        )

    next_seq = conversation.message_count
    skipped = 0
    seen_in_batch: set[str] = set()
    rows: list[dict[str, object]] = []
    for index, message in enumerate(transcript.messages):
        digest = _sha(message.role, message.content)
        if with_ids:
            assert message.id is not None
            known = by_external.get(message.id)
            if known is not None or message.id in seen_in_batch:
                if known and known != digest:
                    raise TranscriptError(
                        f"messages.{index}: id {message.id!r} was stored before with different text"
                    )
                skipped += 1
                continue
            seen_in_batch.add(message.id)
            seq = next_seq
        else:
            seq = index
            known = by_seq.get(seq)
            if known is not None:
                if known and known != digest and index == 0 and transcript.system is not None:
                    raise TranscriptError(
                        "system differs from the conversation's stored system message; a "
                        "transcript without ids must repeat it unchanged (send message ids "
                        "to let it change: a new system prompt is then appended)"
                    )
                if known and known != digest:
                    raise TranscriptError(
                        f"messages.{index} differs from the stored message at that position; "
                        "a transcript without ids must repeat the conversation from its start "
                        "(send message ids to append incrementally)"
                    )
                skipped += 1
                continue
        rows.append(
            {
                "conversation_id": conversation.id,
                "seq": seq,
                "external_id": message.id,
                "role": message.role,
                "content": message.content,
                "content_sha256": digest,
                "created_at": message.created_at or now,
                "language": transcript.language or detect_language(message.content),
            }
        )
        next_seq = seq + 1
        if message.role == "assistant":
            assistant.append(seq)
    stored = len(rows)
    if rows:
        # One executemany of one short statement (psycopg sends it in one pipeline): the
        # ORM's flush would batch the rows into a VALUES list as long as the transcript,
        # a statement of new text (parsed anew) for each length, and ask for their ids.
        session.execute(insert(Message), rows)
    final = conversation.final or transcript.final
    message_count = next_seq if stored else conversation.message_count
    if stored or final != conversation.final:
        session.execute(
            _UPDATE_COUNTS,
            {
                "b_id": conversation.id,
                "b_message_count": message_count,
                "b_assistant_count": len(assistant),
                "b_last_message_at": now if stored else conversation.last_message_at,
                "b_final": final,
            },
        )
    return SavedTranscript(
        conversation_id=conversation.id,
        user_id=conversation.user_id,
        stored=stored,
        skipped=skipped,
        message_count=message_count,
        final=final,
        extracted_to_seq=conversation.extracted_to_seq,
        assistant_seqs=sorted(assistant),
    )


def assistant_seqs(session: Session, conversation_id: str) -> list[int]:
    return list(
        session.scalars(
            select(Message.seq)
            .where(Message.conversation_id == conversation_id, Message.role == "assistant")
            .order_by(Message.seq)
        )
    )


_M = _MESSAGES.c
# built once (the stages run them per job)
_WINDOW = (_M.conversation_id == bindparam("conversation_id")) & _M.seq.between(
    bindparam("start_seq"), bindparam("end_seq")
)
_WINDOW_TEXTS = (
    select(_M.seq, _M.role, _M.content, _M.created_at)
    .where(_WINDOW, _M.purged_at.is_(None))  # retention took its text
    .order_by(_M.seq)
)
_WINDOW_TIMES = select(_M.seq, _M.created_at).where(_WINDOW)


def messages_between(
    session: Session, conversation_id: str, start_seq: int, end_seq: int
) -> list[StoredMessage]:
    rows = session.execute(
        _WINDOW_TEXTS,
        {"conversation_id": conversation_id, "start_seq": start_seq, "end_seq": end_seq},
    )
    return [
        StoredMessage(
            conversation_id=conversation_id, seq=seq, role=role, content=content, created_at=at
        )
        for seq, role, content, at in rows
    ]


def stated_times(
    session: Session, conversation_id: str, start_seq: int, end_seq: int
) -> dict[int, datetime]:
    """When each message of the window was said, by seq: all the store stage needs of
    them (their text was the extract stage's)."""
    rows = session.execute(
        _WINDOW_TIMES,
        {"conversation_id": conversation_id, "start_seq": start_seq, "end_seq": end_seq},
    )
    return {seq: created_at for seq, created_at in rows}


def get_conversation(session: Session, conversation_id: str) -> Conversation | None:
    return session.get(Conversation, conversation_id)


def idle_conversations(
    session: Session, *, idle_since: datetime, limit: int = 500
) -> list[Conversation]:
    """Conversations with messages never extracted and no new message since `idle_since`."""
    return list(
        session.scalars(
            select(Conversation)
            .where(
                Conversation.last_message_at < idle_since,
                Conversation.extracted_to_seq < Conversation.message_count - 1,
            )
            .order_by(Conversation.last_message_at, Conversation.id)
            .limit(limit)
        )
    )
