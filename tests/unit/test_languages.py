"""Keywords, dedup and conflicts in languages other than English (pipeline.language).

Each pair below was written and read by hand: paraphrases say one fact with the words
reordered or a particle changed; near pairs share the frame of a sentence but not its
fact; conflicts say the opposite of the same topic.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memlane.pipeline.dedup import plan as dedup_rules
from memlane.pipeline.dedup.keywords import keywords, language_of, polarity, topic_keywords
from memlane.pipeline.dedup.plan import PlannedSupersede, Sighting
from memlane.pipeline.dedup.prefix_filter import Matcher
from memlane.pipeline.language import analyser
from memlane.pipeline.language.detect import detect_language
from memlane.pipeline.ranking.hashing_embedder import hashing_embed, stemmed_tokens
from memlane.pipeline.records import ExtractedMemory, MemoryRecord
from tests.defaults import DEDUP_MIN_KEYWORDS, DEDUP_THRESHOLD

plan = partial(dedup_rules.plan, threshold=DEDUP_THRESHOLD, min_keywords=DEDUP_MIN_KEYWORDS)
is_duplicate = partial(
    dedup_rules.is_duplicate, threshold=DEDUP_THRESHOLD, min_keywords=DEDUP_MIN_KEYWORDS
)
conflicts = partial(
    dedup_rules.conflicts, threshold=DEDUP_THRESHOLD, min_keywords=DEDUP_MIN_KEYWORDS
)
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

# (language, a, b): one fact, said twice
PARAPHRASES = [
    ("de", "Ich trinke jeden Morgen grünen Tee", "Jeden Morgen trinke ich grünen Tee"),
    (
        "de",
        "Der Nutzer arbeitet als Lehrer in Hamburg",
        "Der Nutzer arbeitet in Hamburg als Lehrer",
    ),
    (
        "fr",
        "L'utilisateur boit du thé vert chaque matin",
        "Chaque matin, l'utilisateur boit du thé vert",
    ),
    (
        "es",
        "El usuario juega al tenis todos los sábados",
        "Todos los sábados el usuario juega al tenis",
    ),
    (
        "pt",
        "O usuário trabalha como enfermeiro em Lisboa",
        "O usuário trabalha em Lisboa como enfermeiro",
    ),
    (
        "it",
        "L'utente corre nel parco ogni domenica mattina",
        "Ogni domenica mattina l'utente corre nel parco",
    ),
    (
        "nl",
        "De gebruiker fietst elke ochtend naar kantoor",
        "Elke ochtend fietst de gebruiker naar kantoor",
    ),
    ("zh", "我每天早上喝绿茶", "每天早上我都喝绿茶"),
    ("ja", "私は毎朝緑茶を飲みます", "毎朝、緑茶を飲んでいます"),
]
# (language, a, b): the same frame, another fact
NEAR = [
    (
        "de",
        "Der Nutzer trinkt jeden Morgen grünen Tee",
        "Der Nutzer trinkt jeden Abend schwarzen Kaffee",
    ),
    (
        "fr",
        "L'utilisateur boit du thé vert chaque matin",
        "L'utilisateur boit du café noir chaque soir",
    ),
    (
        "es",
        "El usuario juega al tenis todos los sábados",
        "El usuario juega al fútbol todos los domingos",
    ),
    (
        "pt",
        "O usuário trabalha como enfermeiro em Lisboa",
        "O usuário trabalha como professor no Porto",
    ),
    (
        "it",
        "L'utente corre nel parco ogni domenica mattina",
        "L'utente nuota in piscina ogni domenica sera",
    ),
    (
        "nl",
        "De gebruiker fietst elke ochtend naar kantoor",
        "De gebruiker wandelt elke avond naar het station",
    ),
    ("zh", "用户每天早上喝绿茶", "用户每天晚上喝红酒"),
    ("ja", "ユーザーは毎朝緑茶を飲みます", "ユーザーは毎晩ビールを飲みます"),
]
# (language, older, newer): the newer says the opposite about the same topic
CONFLICTS = [
    ("de", "Der Nutzer mag Kaffee", "Der Nutzer mag keinen Kaffee"),
    ("de", "Der Nutzer mag Fisch", "Der Nutzer hasst Fisch"),
    ("fr", "L'utilisateur aime le café", "L'utilisateur n'aime pas le café"),
    ("es", "Al usuario le gusta el fútbol", "Al usuario no le gusta el fútbol"),
    ("pt", "O usuário gosta de café", "O usuário não gosta de café"),
    ("it", "All'utente piace la pizza", "All'utente non piace la pizza"),
    ("nl", "De gebruiker houdt van koffie", "De gebruiker houdt niet van koffie"),
    ("zh", "用户喜欢爬山", "用户不喜欢爬山"),
    ("ja", "ユーザーはコーヒーが好きです", "ユーザーはコーヒーが嫌いです"),
]


def _sighting(content: str, seq: int) -> Sighting:
    memory = ExtractedMemory(
        content=content, category="preference", importance=0.8, confidence=1.0, source_seq=seq
    )
    return Sighting.of(memory, conversation_id="c1", new_from_seq=0, end_seq=seq)


def _record(memory_id: str, content: str) -> MemoryRecord:
    return MemoryRecord(
        id=memory_id,
        user_id="u1",
        content=content,
        category="preference",
        importance=0.8,
        confidence=1.0,
        keywords=keywords(content),
        created_at=NOW,
        confirmed_at=NOW,
        accessed_at=NOW,
        source_conversation_id="c0",
    )


@pytest.mark.parametrize(("language", "a", "b"), PARAPHRASES + NEAR + CONFLICTS)
def test_each_text_is_detected_in_its_language(language: str, a: str, b: str) -> None:
    assert (detect_language(a), detect_language(b)) == (language, language)
    assert language_of(keywords(a)) == language


@pytest.mark.parametrize(("language", "a", "b"), PARAPHRASES)
def test_paraphrases_merge(language: str, a: str, b: str) -> None:
    assert is_duplicate(a, keywords(a), b, keywords(b))
    result = plan([_sighting(b, 5)], [_record("m1", a)], now=NOW)
    assert [bump.memory_id for bump in result.bumps] == ["m1"]
    assert result.inserts == ()


@pytest.mark.parametrize(("language", "a", "b"), NEAR)
def test_near_pairs_stay_apart(language: str, a: str, b: str) -> None:
    assert not is_duplicate(a, keywords(a), b, keywords(b))
    assert not conflicts(a, keywords(a), b, keywords(b))
    result = plan([_sighting(b, 5)], [_record("m1", a)], now=NOW)
    assert [(i.memory.content, i.status) for i in result.inserts] == [(b, "active")]
    assert result.bumps == () and result.supersedes == ()


@pytest.mark.parametrize(("language", "older", "newer"), CONFLICTS)
def test_conflicts_supersede(language: str, older: str, newer: str) -> None:
    assert (polarity(older), polarity(newer)) == (1, -1)
    assert topic_keywords(keywords(older)) == topic_keywords(keywords(newer)) != frozenset()
    result = plan([_sighting(newer, 5)], [_record("m1", older)], now=NOW)
    assert result.supersedes == (PlannedSupersede("m1", 0),)
    assert [(i.memory.content, i.status) for i in result.inserts] == [(newer, "active")]


@pytest.mark.parametrize(("language", "a", "b"), PARAPHRASES + CONFLICTS)
def test_the_store_lookup_finds_what_dedup_compares(language: str, a: str, b: str) -> None:
    # the prefix filter's exact check lets every paraphrase and every conflict through
    # (its topics drop the polarity stems of every language)
    assert Matcher([keywords(b)], threshold=DEDUP_THRESHOLD)(keywords(a))


@pytest.mark.parametrize(
    ("english", "other"),
    [
        ("User drinks green tea every morning", "Der Nutzer trinkt jeden Morgen grünen Tee"),
        ("User programs in Python and Rust", "Der Nutzer programmiert in Python und Rust"),
        ("User programs in Python and Rust", "L'utilisateur programme en Python et Rust"),
    ],
)
def test_a_fact_in_two_languages_is_not_merged_by_keywords(english: str, other: str) -> None:
    # "python" and "de:python" are different keywords: no Jaccard across languages
    assert keywords(english) & keywords(other) == frozenset()
    assert not is_duplicate(english, keywords(english), other, keywords(other))
    result = plan([_sighting(other, 5)], [_record("m1", english)], now=NOW)
    assert len(result.inserts) == 1 and result.bumps == ()


def test_cjk_keywords_are_words_not_clauses() -> None:
    # character pairs of the Han runs (末爬 spans two words: pairs have no dictionary), the
    # cue word apart, the subject and the preposition 在 gone
    assert keywords("用户喜欢在周末爬山") == {"zh:喜欢", "zh:周末", "zh:末爬", "zh:爬山"}
    assert keywords("我每天早上喝绿茶") == {
        "zh:每天",
        "zh:天早",
        "zh:早上",
        "zh:上喝",
        "zh:喝绿",
        "zh:绿茶",
    }
    # katakana loan words whole, kanji runs in pairs, hiragana dropped, Latin words kept
    assert keywords("ユーザーは東京でPythonのエンジニアとして働いています") == {
        "ja:東京",
        "ja:python",
        "ja:エンジニア",
        "ja:働",
    }
    assert topic_keywords(keywords("ユーザーは猫が大好きです")) == {"ja:猫"}


def test_german_and_french_keywords() -> None:
    # stemmed by each language's Snowball stemmer, stopwords and the user word dropped
    assert keywords("Der Nutzer trinkt jeden Morgen grünen Tee") == {
        "de:trinkt",
        "de:morg",
        "de:grun",
        "de:tee",
    }
    # elision split: "l'" and "n'" are no keywords, "n'" is a negation
    assert keywords("L'utilisateur n'aime pas les légumes") == {"fr:aim", "fr:légum"}
    assert polarity("L'utilisateur n'aime pas les légumes") == -1


def test_a_given_language_overrides_detection() -> None:
    text = "Der Nutzer trinkt jeden Morgen grünen Tee"
    assert language_of(keywords(text, "nl")) == "nl"
    assert keywords(text, "de") == keywords(text)


def test_english_keywords_are_untagged_and_as_before() -> None:
    assert keywords("User prefers migrating databases") == {"prefer", "migrat", "databas"}
    assert language_of(keywords("User prefers migrating databases")) == "en"


def test_hashing_embedder_reads_other_languages_by_their_keywords() -> None:
    a, b, english = hashing_embed(
        [
            "Ich trinke jeden Morgen grünen Tee",
            "Jeden Morgen trinke ich grünen Tee",
            "User drinks green tea every morning",
        ],
        dim=256,
    )
    cosine = sum(x * y for x, y in zip(a, b, strict=True))
    assert cosine > 0.6
    assert stemmed_tokens("Jeden Morgen trinke ich grünen Tee")[0] == "de:morg"
    assert stemmed_tokens("User drinks green tea every morning") == [
        "user",
        "drink",
        "green",
        "tea",
        "everi",
        "morn",
    ]
    assert any(english)


languages = st.sampled_from(["de", "fr", "es", "pt", "it", "nl", "zh", "ja", "ru", "sv"])


@given(st.text(max_size=60), languages)
def test_keywords_are_tagged_case_blind_and_deterministic(text: str, language: str) -> None:
    words = keywords(text, language)
    assert all(word.startswith(language + ":") for word in words)
    assert words == keywords(text.upper(), language) or text.upper() != text.casefold().upper()
    assert words == analyser.keywords(text, language)
    assert polarity(text, language) in (-1, 1)


@given(st.text(max_size=60))
def test_detection_is_a_language_code(text: str) -> None:
    language = detect_language(text)
    assert language.isalpha() and language.islower() and 2 <= len(language) <= 3
