"""Anthropic keeps `system` beside `messages`: a top-level system (a string, or text
blocks with cache_control) is read as the conversation's first message, role system, at
every door that reads a transcript; unknown top-level fields stay refused, naming the
accepted ones."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memlane.cli.transcript_files import parse_text
from memlane.models.schemas import TranscriptIn
from memlane.pipeline.errors import TranscriptError
from memlane.service.ingest import parse_transcript

MESSAGES = [
    {"role": "user", "content": "I moved to Porto last month."},
    {"role": "assistant", "content": [{"type": "text", "text": "How do you like it?"}]},
]


def transcript(**changes: Any) -> dict[str, Any]:
    return {"conversation_id": "c1", "user_id": "u1", "messages": MESSAGES, **changes}


def roles_and_texts(t: TranscriptIn) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in t.messages]


def test_a_system_string_is_the_first_message() -> None:
    t = parse_transcript(transcript(system="You are a travel assistant."))
    assert roles_and_texts(t) == [
        ("system", "You are a travel assistant."),
        ("user", "I moved to Porto last month."),
        ("assistant", "How do you like it?"),
    ]


def test_system_blocks_with_cache_control_are_joined_and_blank_ones_left_out() -> None:
    blocks = [
        {"type": "text", "text": "You are a travel assistant."},
        {"type": "text", "text": "  "},
        {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}},
    ]
    t = parse_transcript(transcript(system=blocks))
    assert t.messages[0].role == "system"
    assert t.messages[0].content == "You are a travel assistant.\n\nBe brief."
    assert t.ignored_fields == {}  # cache_control is Anthropic's, not an unknown field


@pytest.mark.parametrize("blank", ["", "   ", [], [{"type": "text", "text": ""}]])
def test_a_blank_system_adds_no_message(blank: Any) -> None:
    assert len(parse_transcript(transcript(system=blank)).messages) == len(MESSAGES)


def test_a_dumped_transcript_holds_the_system_once_and_reads_back_the_same() -> None:
    # What the client sends for a TranscriptIn: the system is in messages, not beside them
    t = parse_transcript(transcript(system="Be brief."))
    dumped = t.model_dump(mode="json", exclude_none=True)
    assert "system" not in dumped and dumped["messages"][0]["content"] == "Be brief."
    again = parse_transcript(json.dumps(dumped))
    assert roles_and_texts(again) == roles_and_texts(t)
    # and the same body with the system beside it too: not stored twice
    both = parse_transcript({**dumped, "system": "Be brief."})
    assert roles_and_texts(both) == roles_and_texts(t)


def test_a_system_message_in_messages_stays_after_the_top_level_one() -> None:
    messages = [{"role": "system", "content": "Today is Friday."}, *MESSAGES]
    t = parse_transcript(transcript(system="Be brief.", messages=messages))
    assert roles_and_texts(t)[:2] == [("system", "Be brief."), ("system", "Today is Friday.")]


def test_with_message_ids_the_system_message_gets_one_from_its_text() -> None:
    messages = [{**m, "id": f"m{i}"} for i, m in enumerate(MESSAGES)]
    first = parse_transcript(transcript(system="Be brief.", messages=messages))
    again = parse_transcript(transcript(system="Be brief.", messages=messages[1:]))
    changed = parse_transcript(transcript(system="Be verbose.", messages=messages))
    assert first.messages[0].id is not None and first.messages[0].id.startswith("system-")
    assert again.messages[0].id == first.messages[0].id  # re-sent: skipped by the store
    assert changed.messages[0].id != first.messages[0].id  # a new prompt: a new message


def test_message_errors_keep_the_indices_the_caller_sent() -> None:
    bad = [MESSAGES[0], {"role": "bot", "content": "x"}]
    with pytest.raises(TranscriptError, match=r"messages\.1\.role"):
        parse_transcript(transcript(system="Be brief.", messages=bad))


@pytest.mark.parametrize(
    ("system", "words"),
    [
        (42, "system: expected a string or a list of text blocks"),
        ([{"type": "image", "source": {}}], "system: block 0 is not a text block"),
        ([{"type": "text", "text": 3}], "system: block 0: its text must be a string"),
        ("x" * 100_001, "system: content is 100,001 characters; the limit is 100,000"),
    ],
)
def test_a_malformed_system_is_refused_naming_it(system: Any, words: str) -> None:
    with pytest.raises(TranscriptError) as caught:
        parse_transcript(transcript(system=system))
    assert words in str(caught.value)


def test_unknown_top_level_fields_are_refused_naming_the_accepted_ones() -> None:
    with pytest.raises(TranscriptError) as caught:
        parse_transcript(transcript(model="claude-x", max_tokens=1024))
    message = str(caught.value)
    assert "unknown fields 'model', 'max_tokens'" in message
    for accepted in ("conversation_id", "user_id", "system", "messages", "final", "format"):
        assert accepted in message


def test_a_transcript_file_with_a_system_is_read_the_same() -> None:
    body = json.dumps(
        transcript(system=[{"type": "text", "text": "Be brief."}], format="anthropic")
    )
    (found,) = parse_text(body, "chat.json", jsonl=False)
    assert roles_and_texts(found.transcript)[0] == ("system", "Be brief.")
