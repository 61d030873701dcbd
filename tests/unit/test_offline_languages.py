"""The offline extractor in German, French and Spanish (pipeline.extraction.offline.languages):
first-person statements in the third person, in their language; other languages and
other persons give nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial

import pytest

from memlane.pipeline.dedup.keywords import keywords, language_of, polarity
from memlane.pipeline.extraction.offline import extractor
from memlane.pipeline.records import ExtractionWindow, Role, StoredMessage
from tests.defaults import CATEGORIES, MAX_MEMORIES

extract_offline = partial(extractor.extract_offline, max_memories=MAX_MEMORIES)
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def said(text: str, role: Role = "user") -> list[tuple[str, str]]:
    message = StoredMessage(conversation_id="c", seq=0, role=role, content=text, created_at=T0)
    window = ExtractionWindow(conversation_id="c", user_id="u", messages=[message], new_from_seq=0)
    return [
        (m.content, m.category) for m in extract_offline(window, categories=CATEGORIES).memories
    ]


@pytest.mark.parametrize(
    ("text", "memory", "category"),
    [
        (
            "Ich trinke jeden Morgen grünen Tee.",
            "Der Nutzer trinkt jeden Morgen grünen Tee.",
            "fact",
        ),
        (
            "Ich arbeite als Lehrerin in Hamburg.",
            "Der Nutzer arbeitet als Lehrerin in Hamburg.",
            "fact",
        ),
        ("Ich bin allergisch gegen Erdnüsse.", "Der Nutzer ist allergisch gegen Erdnüsse.", "fact"),
        ("Ich mag keinen Kaffee.", "Der Nutzer mag keinen Kaffee.", "preference"),
        (
            "Ich fahre jeden Tag mit meinem Fahrrad.",
            "Der Nutzer fährt jeden Tag mit seinem Fahrrad.",
            "fact",
        ),
        ("J'aime le vélo le dimanche.", "L'utilisateur aime le vélo le dimanche.", "preference"),
        (
            "Je n'aime pas les légumes verts.",
            "L'utilisateur n'aime pas les légumes verts.",
            "preference",
        ),
        (
            "Je bois du thé vert chaque matin.",
            "L'utilisateur boit du thé vert chaque matin.",
            "fact",
        ),
        ("Je m'appelle Marie Dubois.", "L'utilisateur s'appelle Marie Dubois.", "fact"),
        (
            "Je travaille avec mon frère à Lyon.",
            "L'utilisateur travaille avec son frère à Lyon.",
            "fact",
        ),
        ("Me gusta mucho el fútbol.", "Al usuario le gusta mucho el fútbol.", "preference"),
        (
            "No me gustan las aceitunas negras.",
            "Al usuario no le gustan las aceitunas negras.",
            "preference",
        ),
        ("Vivo en Madrid con mi pareja.", "El usuario vive en Madrid con su pareja.", "fact"),
        (
            "Yo no tengo coche desde hace años.",
            "El usuario no tiene coche desde hace años.",
            "fact",
        ),
        ("Me llamo Lucía Fernández.", "El usuario se llama Lucía Fernández.", "fact"),
    ],
)
def test_first_person_statements_become_third_person_in_their_language(
    text: str, memory: str, category: str
) -> None:
    assert said(text) == [(memory, category)]


def test_the_memory_keeps_its_language_and_polarity() -> None:
    [(content, _)] = said("Ich mag keinen Kaffee mehr.")
    assert language_of(keywords(content)) == "de" and polarity(content) == -1


@pytest.mark.parametrize(
    "text",
    [
        "Trinkst du gerne grünen Tee am Morgen?",  # a question
        "Mein Bruder wohnt seit Jahren in Berlin.",  # another subject: not read
        "Como te dije ayer, es muy tarde.",  # "como" is no verb here
        "Il travaille à Paris depuis longtemps.",  # third person already: someone else
        "私は毎朝緑茶を飲みます。",  # Japanese: no offline rules
    ],
)
def test_other_sentences_give_nothing(text: str) -> None:
    assert said(text) == []


def test_an_assistant_sentence_in_another_language_is_not_the_users() -> None:
    assert said("Ich trinke jeden Morgen grünen Tee.", role="assistant") == []


def test_english_is_read_by_the_english_rules_as_before() -> None:
    assert said("I prefer TypeScript over JavaScript for frontend work.") == [
        ("User prefers TypeScript over JavaScript for frontend work.", "preference")
    ]
