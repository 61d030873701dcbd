from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlalchemy import func, select

from memlane.models.db import unit_of_work
from memlane.models.schemas import TranscriptIn
from memlane.models.store.conversations import messages as conversations
from memlane.models.tables import Conversation, Message
from memlane.pipeline.errors import TranscriptError


def transcript(
    n: int, *, ids: bool = False, conversation: str = "c1", user: str = "u1", final: bool = False
) -> TranscriptIn:
    roles = ["user", "assistant"]
    return TranscriptIn.model_validate(
        {
            "conversation_id": conversation,
            "user_id": user,
            "final": final,
            "messages": [
                {
                    "role": roles[i % 2],
                    "content": f"message number {i}",
                    **({"id": f"m{i}"} if ids else {}),
                }
                for i in range(n)
            ],
        }
    )


def message_count(url: str) -> int:
    with unit_of_work(url) as s:
        return int(s.scalar(select(func.count()).select_from(Message)) or 0)


def test_resending_a_transcript_or_a_longer_one_stores_each_message_once(
    db_url: str, now: datetime
) -> None:
    with unit_of_work(db_url) as s:
        first = conversations.save_transcript(s, transcript(4), now=now)
    with unit_of_work(db_url) as s:
        again = conversations.save_transcript(s, transcript(4), now=now)
    with unit_of_work(db_url) as s:
        longer = conversations.save_transcript(s, transcript(7), now=now)
    assert (first.stored, first.skipped) == (4, 0)
    assert (again.stored, again.skipped) == (0, 4)
    assert (longer.stored, longer.skipped) == (3, 4)
    assert message_count(db_url) == 7
    with unit_of_work(db_url) as s:
        conv = s.get(Conversation, "c1")
        assert conv is not None
        assert (conv.message_count, conv.assistant_count) == (7, 3)
        assert [m.seq for m in conversations.messages_between(s, "c1", 0, 99)] == list(range(7))
        assert conversations.assistant_seqs(s, "c1") == [1, 3, 5]


def test_messages_with_ids_append_incrementally(db_url: str, now: datetime) -> None:
    whole = transcript(6, ids=True)
    with unit_of_work(db_url) as s:
        conversations.save_transcript(
            s, whole.model_copy(update={"messages": whole.messages[:3]}), now=now
        )
    with unit_of_work(db_url) as s:
        saved = conversations.save_transcript(
            s, whole.model_copy(update={"messages": whole.messages[2:]}), now=now
        )
    assert (saved.stored, saved.skipped) == (3, 1)
    with unit_of_work(db_url) as s:
        texts = [m.content for m in conversations.messages_between(s, "c1", 0, 99)]
    assert texts == [f"message number {i}" for i in range(6)]


def test_a_changed_message_rejects_the_whole_transcript_and_writes_nothing(
    db_url: str, now: datetime
) -> None:
    with unit_of_work(db_url) as s:
        conversations.save_transcript(s, transcript(3), now=now)
    changed = transcript(5)
    messages = list(changed.messages)
    messages[1] = messages[1].model_copy(update={"content": "edited"})
    with pytest.raises(TranscriptError, match=r"messages\.1 differs"), unit_of_work(db_url) as s:
        conversations.save_transcript(s, changed.model_copy(update={"messages": messages}), now=now)
    assert message_count(db_url) == 3  # messages 3 and 4 were not written either


def test_an_id_reused_with_other_text_is_rejected(db_url: str, now: datetime) -> None:
    with unit_of_work(db_url) as s:
        conversations.save_transcript(s, transcript(2, ids=True), now=now)
    bad = TranscriptIn.model_validate(
        {
            "conversation_id": "c1",
            "user_id": "u1",
            "messages": [{"id": "m1", "role": "assistant", "content": "different"}],
        }
    )
    with pytest.raises(TranscriptError, match="m1"), unit_of_work(db_url) as s:
        conversations.save_transcript(s, bad, now=now)


def test_a_conversation_cannot_change_user(db_url: str, now: datetime) -> None:
    with unit_of_work(db_url) as s:
        conversations.save_transcript(s, transcript(2), now=now)
    with pytest.raises(TranscriptError, match="another user"), unit_of_work(db_url) as s:
        conversations.save_transcript(s, transcript(2, user="u2"), now=now)


def test_idle_conversations_are_those_with_unread_messages_and_no_recent_message(
    db_url: str, now: datetime
) -> None:
    with unit_of_work(db_url) as s:
        conversations.save_transcript(s, transcript(3, conversation="old"), now=now)
        conversations.save_transcript(
            s, transcript(3, conversation="new"), now=now + timedelta(hours=1)
        )
    with unit_of_work(db_url) as s:
        idle = conversations.idle_conversations(s, idle_since=now + timedelta(minutes=30))
    assert [c.id for c in idle] == ["old"]


def test_a_transcript_and_its_jobs_are_stored_in_a_fixed_number_of_statements(
    db_url: str, now: datetime
) -> None:
    # The enqueue runs inside the chat app's request: storing a transcript's messages and
    # its jobs costs the same few statements whatever its length (one executemany for the
    # messages, one INSERT for the jobs), not one per message or per job.
    from sqlalchemy import event

    from memlane.models.db import get_engine
    from memlane.models.store.conversations import jobs
    from memlane.pipeline.extraction.cadence import due_windows

    sent: list[str] = []

    def count(_conn, _cursor, statement, *_args) -> None:  # type: ignore[no-untyped-def]
        sent.append(statement)

    engine = get_engine(db_url)
    event.listen(engine, "before_cursor_execute", count)
    try:
        for size, conversation in ((4, "short"), (40, "long")):
            sent.clear()
            with unit_of_work(db_url) as s:
                saved = conversations.save_transcript(
                    s, transcript(size, conversation=conversation), now=now
                )
                windows = due_windows(
                    assistant_seqs=saved.assistant_seqs,
                    message_count=saved.message_count,
                    extracted_to_seq=saved.extracted_to_seq,
                    every=5,
                    window=20,
                    final=True,
                )
                created = jobs.create_jobs(
                    s,
                    conversation_id=saved.conversation_id,
                    user_id=saved.user_id,
                    windows=windows,
                    now=now,
                )
            assert saved.stored == size and len(created) == len(windows) >= 1
            assert saved.assistant_seqs == list(range(1, size, 2))
            assert len(sent) <= 7, sent
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert message_count(db_url) == 44
