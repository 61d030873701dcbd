"""parse_extraction: strict and total. Either a validated Extraction (with what was dropped
and why) or an ExtractionError carrying the raw answer — never anything else."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlane.pipeline.errors import ExtractionError
from memlane.pipeline.extraction import extract as extract_rules
from memlane.pipeline.extraction.extract import MAX_ANSWER_CHARS
from memlane.pipeline.records import ExtractedEpisode, ExtractedMemory, Extraction
from tests.defaults import CATEGORIES, MAX_MEMORIES

# The settings' defaults, passed as memlane's callers pass the settings.
parse_extraction = partial(extract_rules.parse_extraction, max_memories=MAX_MEMORIES)

EPISODE = {"summary": "Auth migration planning.", "topics": ["auth0"], "outcome": None}


def memory(content: str = "User prefers TypeScript.", **fields: Any) -> dict[str, Any]:
    return {
        "content": content,
        "category": "preference",
        "importance": 0.7,
        "confidence": 1.0,
    } | fields


def answer(*memories: Any, episode: Any = EPISODE) -> str:
    return json.dumps({"memories": list(memories), "episode": episode})


VALID = answer(memory(), memory("User's name is Maya.", category="fact", importance=0.9))


def test_plain_json_gives_the_memories_and_the_episode():
    parsed = parse_extraction(VALID, categories=CATEGORIES)
    assert parsed.dropped == []
    assert parsed.extraction == Extraction(
        memories=[
            ExtractedMemory(
                content="User prefers TypeScript.",
                category="preference",
                importance=0.7,
                confidence=1.0,
            ),
            ExtractedMemory(
                content="User's name is Maya.", category="fact", importance=0.9, confidence=1.0
            ),
        ],
        episode=ExtractedEpisode(summary="Auth migration planning.", topics=["auth0"]),
    )


@pytest.mark.parametrize(
    "wrapped",
    [
        f"```json\n{VALID}\n```",
        f"```\n{VALID}\n```",
        f"Here is the extraction you asked for:\n{VALID}\nLet me know if you need more.",
        f"Sure! {VALID}",
        f"{VALID} Hope that helps {{not json}}",
        f"Use {{}} for nothing. Answer: {VALID}",
        f'Format: {{"note": "example"}}\n```json\n{VALID}\n```',
    ],
)
def test_the_json_object_is_recovered_from_fences_and_prose(wrapped):
    assert (
        parse_extraction(wrapped, categories=CATEGORIES).extraction
        == parse_extraction(VALID, categories=CATEGORIES).extraction
    )


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("", "empty"),
        ("   \n", "empty"),
        ("I could not find any memories in this conversation.", "no JSON object"),
        ("[]", "not an object"),
        ('"memories"', "not an object"),
        ('{"memories": [', "no JSON object"),
        ("{" * 5000, "no JSON object"),
        ("[" * 100_000, "no JSON object"),
        (json.dumps({"episode": EPISODE}), "memories are missing"),
        (json.dumps({"memories": {"a": 1}, "episode": EPISODE}), "not a list"),
        (json.dumps({"memories": []}), "episode is missing"),
        (answer(episode="just text"), "episode is missing or not an object"),
        (answer(episode={"topics": []}), "no summary"),
        (answer(episode={"summary": "   "}), "no summary"),
        (answer(episode={"summary": "x" * 2001}), "2,001 characters"),
        (answer(episode={"summary": "s", "topics": "auth"}), "topics"),
        (answer(episode={"summary": "s", "topics": [1]}), "topics"),
        (answer(episode={"summary": "s", "outcome": 3}), "outcome"),
        ("x" * (MAX_ANSWER_CHARS + 1), "at most"),
    ],
)
def test_an_unusable_answer_raises_with_the_raw_text(raw, reason):
    with pytest.raises(ExtractionError, match=reason) as caught:
        parse_extraction(raw, categories=CATEGORIES)
    assert caught.value.raw == raw


@pytest.mark.parametrize(
    ("field", "given", "kept"),
    [
        ("importance", 1.7, 1.0),
        ("importance", -0.2, 0.0),
        ("importance", 3, 1.0),
        ("importance", "0.8", 0.8),
        ("importance", " 1e3 ", 1.0),
        ("confidence", 0, 0.0),
        ("confidence", "0.7", 0.7),
    ],
)
def test_scores_are_clamped_and_numeric_strings_accepted(field, given, kept):
    parsed = parse_extraction(answer(memory(**{field: given})), categories=CATEGORIES)
    assert getattr(parsed.extraction.memories[0], field) == kept
    assert parsed.dropped == []


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"importance": "high"}, "importance 'high' is not a number"),
        ({"importance": True}, "importance True is not a number"),
        ({"importance": None}, "importance None is not a number"),
        ({"confidence": [1]}, "confidence [1] is not a number"),
        ({"category": "feeling"}, "category 'feeling' is not one of"),
        ({"category": None}, "category None"),
        ({"content": "   "}, "content is missing or empty"),
        ({"content": 42}, "content is missing or empty"),
        ({"content": "x" * 1001}, "1,001 characters"),
    ],
)
def test_a_bad_memory_is_dropped_with_its_reason(fields, reason):
    parsed = parse_extraction(
        answer(memory("User likes tea.", category="fact"), memory(**fields)), categories=CATEGORIES
    )
    assert [m.content for m in parsed.extraction.memories] == ["User likes tea."]
    assert len(parsed.dropped) == 1
    assert parsed.dropped[0].startswith("memories[1]: ")
    assert reason in parsed.dropped[0]


def test_nan_importance_is_dropped():
    raw = (
        '{"memories": [{"content": "c", "category": "fact", "importance": NaN,'
        ' "confidence": 1}], "episode": {"summary": "s"}}'
    )
    parsed = parse_extraction(raw, categories=CATEGORIES)
    assert parsed.extraction.memories == []
    assert parsed.dropped == ["memories[0]: importance nan is not a number"]


def test_a_memory_that_is_not_an_object_is_dropped():
    parsed = parse_extraction(answer("User likes tea.", memory()), categories=CATEGORIES)
    assert len(parsed.extraction.memories) == 1
    assert parsed.dropped == ["memories[0]: not an object"]


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("Preferences", "preference"),
        (" FACT ", "fact"),
        ("decisions", "decision"),
        ("projects", "project"),
    ],
)
def test_category_case_and_plurals_are_accepted(given, kept):
    parsed = parse_extraction(answer(memory(category=given)), categories=CATEGORIES)
    assert parsed.extraction.memories[0].category == kept


def test_content_is_trimmed_and_whitespace_collapsed():
    parsed = parse_extraction(answer(memory("  User   prefers\n\ttabs.  ")), categories=CATEGORIES)
    assert parsed.extraction.memories[0].content == "User prefers tabs."


def test_source_seq_is_kept_only_when_a_non_negative_integer():
    parsed = parse_extraction(
        answer(memory(source_seq=4), memory("b", source_seq=-1), memory("c", source_seq="4")),
        categories=CATEGORIES,
    )
    assert [m.source_seq for m in parsed.extraction.memories] == [4, None, None]


def test_when_every_memory_is_dropped_the_result_is_empty_but_says_why():
    parsed = parse_extraction(
        answer(memory(category="mood"), memory(importance="lots")), categories=CATEGORIES
    )
    assert parsed.extraction.memories == []
    assert len(parsed.dropped) == 2


def test_over_the_cap_the_most_important_are_kept_in_their_original_order():
    importances = [0.5, 0.9, 0.3, 0.9, 0.7, 0.5, 0.1, 0.8, 0.6, 0.5, 0.95, 0.2]
    raw = answer(*(memory(f"m{i}", importance=imp) for i, imp in enumerate(importances)))
    parsed = parse_extraction(raw, categories=CATEGORIES)
    # dropped: 0.1 (m6) and 0.2 (m11); the three 0.5s all fit
    assert [m.content for m in parsed.extraction.memories] == [
        "m0",
        "m1",
        "m2",
        "m3",
        "m4",
        "m5",
        "m7",
        "m8",
        "m9",
        "m10",
    ]
    assert parsed.dropped == [
        "memories[6]: over the cap of 10 (importance 0.1)",
        "memories[11]: over the cap of 10 (importance 0.2)",
    ]


def test_ties_at_the_cap_keep_the_earlier_memory():
    raw = answer(
        memory("a", importance=0.5), memory("b", importance=0.9), memory("c", importance=0.5)
    )
    parsed = parse_extraction(raw, max_memories=2, categories=CATEGORIES)
    assert [m.content for m in parsed.extraction.memories] == ["a", "b"]
    assert parsed.dropped == ["memories[2]: over the cap of 2 (importance 0.5)"]


def test_max_memories_zero_keeps_none_and_says_so():
    parsed = parse_extraction(VALID, max_memories=0, categories=CATEGORIES)
    assert parsed.extraction.memories == []
    assert len(parsed.dropped) == 2


def test_max_memories_above_the_design_cap_is_refused():
    with pytest.raises(ValueError, match="max_memories"):
        parse_extraction(VALID, max_memories=11, categories=CATEGORIES)


def test_episode_topics_are_cleaned_and_outcome_blank_is_none():
    episode = {
        "summary": " Auth\n work ",
        "topics": [" Auth0 ", "auth0", "", "jwt"],
        "outcome": "  ",
    }
    parsed = parse_extraction(answer(episode=episode), categories=CATEGORIES)
    assert parsed.extraction.episode == ExtractedEpisode(
        summary="Auth work", topics=["Auth0", "jwt"], outcome=None
    )


def test_more_than_20_topics_keeps_the_first_20_and_says_so():
    episode = {"summary": "s", "topics": [f"t{i}" for i in range(23)], "outcome": "done"}
    parsed = parse_extraction(answer(episode=episode), categories=CATEGORIES)
    assert parsed.extraction.episode.topics == [f"t{i}" for i in range(20)]
    assert parsed.extraction.episode.outcome == "done"
    assert parsed.dropped == ["episode.topics: 3 over the cap of 20"]


@settings(max_examples=300)
@given(st.text(max_size=400))
def test_arbitrary_text_either_parses_or_raises_extraction_error(raw):
    try:
        parsed = parse_extraction(raw, categories=CATEGORIES)
    except ExtractionError as error:
        assert error.raw == raw
    else:
        assert len(parsed.extraction.memories) <= 10


json_values = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=True) | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "memories",
                    "episode",
                    "content",
                    "category",
                    "importance",
                    "confidence",
                    "summary",
                    "topics",
                    "outcome",
                    "x",
                ]
            ),
            inner,
            max_size=5,
        )
    ),
    max_leaves=30,
)


@settings(max_examples=300)
@given(json_values, st.text(max_size=30), st.text(max_size=30))
def test_arbitrary_json_in_prose_either_parses_or_raises_extraction_error(value, before, after):
    raw = f"{before}{json.dumps(value)}{after}"
    try:
        parse_extraction(raw, categories=CATEGORIES)
    except ExtractionError as error:
        assert error.raw == raw


collapsed_text = st.text(min_size=1, max_size=60).map(lambda s: " ".join(s.split())).filter(bool)
extractions = st.builds(
    Extraction,
    memories=st.lists(
        st.builds(
            ExtractedMemory,
            content=collapsed_text,
            category=st.sampled_from(CATEGORIES),
            importance=st.floats(0, 1),
            confidence=st.floats(0, 1),
            source_seq=st.none() | st.integers(0, 10_000),
        ),
        max_size=10,
    ),
    episode=st.builds(
        ExtractedEpisode,
        summary=collapsed_text,
        topics=st.lists(collapsed_text, max_size=5, unique_by=str.casefold),
        outcome=st.none() | collapsed_text,
    ),
)


@given(extractions, st.sampled_from(["{}", "```json\n{}\n```", "Here you go: {} Thanks!"]))
def test_a_valid_extraction_round_trips_through_any_wrapping(extraction, wrapping):
    raw = wrapping.replace("{}", extraction.model_dump_json())
    parsed = parse_extraction(raw, categories=CATEGORIES)
    assert parsed.extraction == extraction
    assert parsed.dropped == []
