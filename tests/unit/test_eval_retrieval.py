"""The retrieval evaluation's data and baselines (bench/eval_retrieval.py)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from bench.eval_retrieval import (
    Question,
    RawMessage,
    bm25_window,
    load,
    raw_messages,
    recent_window,
)
from memlane.pipeline.assembly.tokens import encoding_for_model

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def enc():
    return encoding_for_model("gpt-4o-mini")


def messages(*texts: str) -> list[RawMessage]:
    return [RawMessage(text, T0 + timedelta(minutes=i)) for i, text in enumerate(texts)]


def test_the_data_set_is_what_the_docstring_says() -> None:
    transcripts, questions = load()
    users = {t.user_id for t in transcripts}
    assert users == {"lena", "tomas", "aisha", "ben"}
    assert all(sum(t.user_id == u for t in transcripts) == 4 for u in users)
    assert sum(len(t.messages) for t in transcripts) == 200
    assert len(questions) == 44
    for q in questions:
        said = [
            m
            for t in transcripts
            if t.user_id == q.user_id
            for m in t.messages
            if q.answered_by(m.content)
        ]
        # every answer is in that user's conversations, and nowhere in anyone else's
        assert said, q.question
        assert {m.role for m in said} >= {q.said_by}, q.question
        others = [t for t in transcripts if t.user_id != q.user_id]
        assert not any(q.answered_by(m.content) for t in others for m in t.messages), q.question
        assert q.answered_by(q.memory), q.question  # the reference fact carries the answer


def test_answers_honour_inline_case_flags() -> None:
    q = Question("u", "Which language?", (r"(?-i:with R\b)",), "user", "decision", "-")
    assert q.answered_by("I'll stay with R for the statistics")
    assert not q.answered_by("I'll stay with r for the statistics")
    assert not q.answered_by("R has mixed models")


def test_recent_window_takes_the_newest_until_one_does_not_fit(enc) -> None:
    msgs = messages("user: old " + "word " * 50, "user: middle", "assistant: newest")
    budget = len(enc.encode("user: middle\n")) + len(enc.encode("assistant: newest\n"))
    assert recent_window(msgs, budget, enc) == "user: middle\nassistant: newest"
    assert recent_window(msgs, budget - 1, enc) == "assistant: newest"
    assert recent_window(msgs, 0, enc) == ""


def test_bm25_window_ranks_by_the_question_and_fills_the_budget(enc) -> None:
    msgs = messages(
        "user: My sourdough starter is called Gerald.",
        "assistant: Bake it covered for twenty minutes.",
        "user: The oven only reaches 250 degrees.",
    )
    one = len(enc.encode(msgs[0].text + "\n"))
    assert bm25_window(msgs, "What is the starter called?", one, enc) == msgs[0].text
    # with room for all, the matching message comes first, then the rest newest first
    everything = bm25_window(msgs, "What is the starter called?", 10_000, enc)
    assert everything.splitlines() == [msgs[0].text, msgs[2].text, msgs[1].text]


def test_raw_messages_are_one_users_in_time_order() -> None:
    transcripts, _ = load()
    lena = raw_messages(transcripts, "lena")
    assert len(lena) == sum(len(t.messages) for t in transcripts if t.user_id == "lena")
    assert [m.created_at for m in lena] == sorted(m.created_at for m in lena)
    assert all(re.match(r"(user|assistant): ", m.text) for m in lena)
