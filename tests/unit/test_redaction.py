"""Redacting a removed fact out of derived texts (pipeline/dedup/redaction.py): a sentence
that uses a word only the fact used, or most of the fact's words, becomes the marker;
others stay word for word; topics that quote it go; a kept extraction loses the memory
whole and its episode is redacted."""

from __future__ import annotations

from memlane.pipeline.dedup.keywords import keywords
from memlane.pipeline.dedup.redaction import (
    MARKER,
    EpisodeText,
    RemovedFact,
    may_quote,
    quotes,
    redact_episode,
    redact_extraction,
    redact_text,
)

AXOLOTL = "User keeps a pet axolotl named Quetzalcoatl."


def fact(text: str, *, kept: str = "") -> RemovedFact:
    """The fact's RemovedFact when the user's other memories hold `kept`'s keywords."""
    return RemovedFact.of(keywords(text), kept=keywords(kept))


def test_a_word_only_the_fact_used_makes_a_sentence_quote_it() -> None:
    gone = fact(AXOLOTL, kept="User keeps a diary. User has a pet cat.")
    assert gone.distinctive == keywords("axolotl named Quetzalcoatl")
    assert quotes(keywords("Quetzalcoatl was mentioned."), gone)
    # words other memories also hold are not enough alone
    assert not quotes(keywords("The user keeps a diary."), gone)


def test_most_of_the_facts_words_quote_it_though_none_is_distinctive() -> None:
    allergy = "User is allergic to peanuts and shellfish."
    gone = fact(allergy, kept="Allergic to cats. Likes peanuts. Cooks shellfish.")
    assert gone.distinctive == frozenset()
    assert quotes(keywords("Allergic to peanuts, and to shellfish too."), gone)
    assert not quotes(keywords("Likes peanuts on toast."), gone)  # one of three words


def test_only_the_quoting_sentences_become_the_marker() -> None:
    summary = (
        "The user talked about their pet axolotl. It is named Quetzalcoatl!\n"
        "They also plan a hiking trip to Patagonia. Then they asked about tea."
    )
    redacted = redact_text(summary, [fact(AXOLOTL)])
    assert (
        redacted
        == f"{MARKER} They also plan a hiking trip to Patagonia. Then they asked about tea."
    )
    assert "axolotl" not in redacted.lower() and "quetzalcoatl" not in redacted.lower()
    untouched = "Conversation about tea and hiking."
    assert redact_text(untouched, [fact(AXOLOTL)]) is untouched  # nothing quoted: as it was
    assert redact_text(summary, []) is summary


def test_an_episode_loses_its_quoting_topics_and_outcome_and_says_whether_it_changed() -> None:
    episode = EpisodeText(
        summary="Conversation about axolotl, hiking: I keep an axolotl.",
        topics=("axolotl", "hiking", "Quetzalcoatl"),
        outcome="Named the axolotl.",
    )
    redacted = redact_episode(episode, [fact(AXOLOTL)])
    assert redacted == EpisodeText(summary=MARKER, topics=("hiking",), outcome=MARKER)
    assert redact_episode(EpisodeText("About hiking.", ("hiking",), None), [fact(AXOLOTL)]) is None


def test_a_kept_extraction_drops_the_quoting_memory_whole_and_redacts_its_episode() -> None:
    extraction = {
        "memories": [
            {"content": AXOLOTL, "category": "fact", "importance": 0.6, "confidence": 1.0},
            {"content": "User hikes in Patagonia.", "category": "fact", "importance": 0.5,
             "confidence": 1.0},
        ],
        "episode": {"summary": "Pets: an axolotl. Trips: Patagonia.", "topics": ["axolotl"],
                    "outcome": None},
    }  # fmt: skip
    redacted = redact_extraction(extraction, [fact(AXOLOTL)])
    assert redacted is not None
    assert [m["content"] for m in redacted["memories"]] == ["User hikes in Patagonia."]
    assert redacted["episode"] == {"summary": f"{MARKER} Trips: Patagonia.", "topics": [],
                                   "outcome": None}  # fmt: skip
    assert extraction["memories"][0]["content"] == AXOLOTL  # the input is not changed
    assert redact_extraction(redacted, [fact(AXOLOTL)]) is None  # nothing left to take


def test_the_quick_screen_never_misses_a_word_the_sentence_reading_would_find() -> None:
    """may_quote is the sentence reading's prefilter: whatever the reading redacts, the
    screen lets through (stems of inflected forms too: "dying" stems to "die")."""
    gone = [fact("The user's grandmother was dying of tuberculosis in the skies.")]
    for text in (
        "She died of it.",
        "Tuberculosis: a word.",
        "They watched the sky.",
        "GRANDMOTHERS are kind.",
        "A note about dying.",
    ):
        assert may_quote(text, gone), text
        assert redact_text(text, gone) == MARKER, text
    assert not may_quote("Nothing related here at all.", gone)
