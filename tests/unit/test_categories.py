"""The category set: MEMLANE_CATEGORIES read and bounded (config.categories), and what
the pipeline does with it: the check, the extraction prompt and schema, the answer's
parse and the offline extractor's fit (pipeline.categories)."""

from __future__ import annotations

from datetime import UTC, datetime

import jsonschema
import pytest

from memlane.config import categories as config_categories
from memlane.config.settings import SettingsError, load_settings
from memlane.pipeline.categories import DEFAULT_CATEGORIES, category_problem, fit_category
from memlane.pipeline.extraction.extract import parse_extraction
from memlane.pipeline.extraction.offline.extractor import extract_offline
from memlane.pipeline.extraction.prompts import build_extraction_messages, extraction_json_schema
from memlane.pipeline.records import ExtractionWindow, MemoryRecord, StoredMessage
from tests.defaults import CATEGORIES

parse_categories = config_categories.parse_categories
AT = datetime(2026, 3, 1, tzinfo=UTC)


def window(*texts: str) -> ExtractionWindow:
    messages = [
        StoredMessage(conversation_id="c", seq=i, role="user", content=text, created_at=AT)
        for i, text in enumerate(texts)
    ]
    return ExtractionWindow(conversation_id="c", user_id="u", messages=messages, new_from_seq=0)


def test_the_two_defaults_agree() -> None:
    assert config_categories.DEFAULT_CATEGORIES == DEFAULT_CATEGORIES
    assert load_settings().categories == DEFAULT_CATEGORIES


@pytest.mark.parametrize(
    ("given", "read"),
    [
        ("fact,hobby", ("fact", "hobby")),
        (" fact , hobby ,", ("fact", "hobby")),
        ('["hobby", "work_item2"]', ("hobby", "work_item2")),
    ],
)
def test_a_set_is_read_comma_separated_or_as_json(given: str, read: tuple[str, ...]) -> None:
    assert parse_categories(given) == read


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("", "at least one"),
        ("fact,Hobby", "'Hobby' is not a lowercase word"),
        ("fact,my hobby", "'my hobby'"),
        ("fact,2fa", "'2fa'"),
        ("a_name_of_seventeen", "at most 16 characters"),
        ("fact,hobby,fact", "'fact' is named twice"),
        (",".join(f"c{i}" for i in range(17)), "17 categories; at most 16"),
        ('["fact", 3]', "not a JSON list of category names"),
        ("[fact", "not a JSON list"),
    ],
)
def test_a_bad_set_is_refused_saying_why(given: str, says: str) -> None:
    with pytest.raises(ValueError, match=says.replace("[", r"\[")):
        parse_categories(given)


def test_the_setting_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLANE_CATEGORIES", "fact,hobby")
    assert load_settings().categories == ("fact", "hobby")
    monkeypatch.setenv("MEMLANE_CATEGORIES", "fact,Hobby")
    with pytest.raises(SettingsError, match="MEMLANE_CATEGORIES"):
        load_settings()


def test_the_check_names_the_configured_set() -> None:
    assert category_problem("hobby", ("fact", "hobby")) is None
    problem = category_problem("hobby", DEFAULT_CATEGORIES)
    assert problem is not None
    assert "'hobby'" in problem and "preference, fact, decision, project" in problem


def test_the_prompt_and_the_schema_list_the_configured_set() -> None:
    system = build_extraction_messages(window("hi"), max_memories=3, categories=("fact", "hobby"))[
        0
    ]["content"]
    assert '"category": "fact|hobby"' in system
    assert "one of fact (about the user: name" in system and ", hobby." in system
    assert "preference" not in system.split("Memories:")[1].split("importance from")[0]
    default = build_extraction_messages(window("hi"), max_memories=3, categories=CATEGORIES)[0][
        "content"
    ]
    assert '"category": "preference|fact|decision|project"' in default
    schema = extraction_json_schema(("fact", "hobby"))
    item = schema["properties"]["memories"]["items"]
    assert item["properties"]["category"]["enum"] == ["fact", "hobby"]
    answer = {
        "memories": [
            {"content": "x", "category": "hobby", "importance": 1, "confidence": 1, "about": "user"}
        ],
        "episode": {"summary": "s", "topics": [], "outcome": None},
    }
    jsonschema.validate(answer, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(answer, extraction_json_schema(CATEGORIES))


def test_an_answer_is_read_against_the_configured_set() -> None:
    raw = (
        '{"memories": ['
        '{"content": "Plays chess.", "category": "Hobbys", "importance": 0.5, "confidence": 1},'
        '{"content": "Likes tea.", "category": "preference", "importance": 0.5, "confidence": 1}'
        '], "episode": {"summary": "s"}}'
    )
    parsed = parse_extraction(raw, max_memories=10, categories=("fact", "hobby"))
    assert [(m.content, m.category) for m in parsed.extraction.memories] == [
        ("Plays chess.", "hobby")
    ]
    assert parsed.dropped == ["memories[1]: category 'preference' is not one of fact, hobby"]
    by_default = parse_extraction(raw, max_memories=10, categories=CATEGORIES)
    assert [m.category for m in by_default.extraction.memories] == ["preference"]


def test_the_offline_extractor_fits_its_categories_to_the_set() -> None:
    said = window("I love green tea.", "I live in Lisbon.")
    assert [
        m.category for m in extract_offline(said, max_memories=10, categories=CATEGORIES).memories
    ] == [
        "preference",
        "fact",
    ]
    fitted = extract_offline(said, max_memories=10, categories=("fact", "hobby"))
    assert [m.category for m in fitted.memories] == ["fact", "fact"]
    first = extract_offline(said, max_memories=10, categories=("hobby", "preference"))
    assert [m.category for m in first.memories] == ["preference", "hobby"]
    assert fit_category("decision", ("project", "fact")) == "project"


def test_a_record_keeps_any_stored_category() -> None:
    record = MemoryRecord(
        id="m",
        user_id="u",
        content="c",
        category="removed_later",
        importance=0.5,
        confidence=1.0,
        created_at=AT,
        accessed_at=AT,
    )
    assert record.category == "removed_later"
