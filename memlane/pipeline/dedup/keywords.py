"""Keywords, normalised text and polarity: what deduplication compares.

keywords(text) = { stem(t) : t a word token of text, t not a stopword }
- text is NFKC-normalised and case-folded; typographic apostrophes become "'".
- a word token is a run of letters/digits (any script), possibly joined by apostrophes,
  so "don't" and "user's" stay one token ("c++" gives "c", "node.js" gives "node", "js").
- stopwords: NLTK's English list, written out below, plus negations spelt without an
  apostrophe ("dont"), "never", "cannot" and "anymore", and the subject word of extracted
  memories, "user" ("users" stays a keyword: a product's users are a topic). Negations
  are therefore never keywords: whether a statement is negated is `polarity`'s job, not
  a topic word.
- "longer" right after "no" is part of the negation "no longer", not a keyword.
- stems: Snowball's English stemmer ("migrating", "migration" → "migrat").

polarity(text) is −1 when the text contains a negation marker (not, no, never, nor,
cannot, neither, any "n't" contraction or its apostrophe-less spelling, anymore, or a
word stemming to dislike / hate / stop / quit), otherwise +1. Any marker makes the text
negative; markers are not counted, because "doesn't like Java anymore" has two and is
still negative. A double negation ("doesn't dislike") therefore reads as negative: the
rule is a heuristic for memory sentences, not a parser.

Other languages: `keywords(text, language)` and `polarity(text, language)` take the
text's language (ISO 639-1; detected by pipeline.language.detect when not given) and,
for any but English, hand over to pipeline.language.analyser: its stopwords, Snowball
stemmer and polarity cues, keywords tagged with the language ("de:tee"). English
keywords stay untagged and exactly as above. `language_of(keywords)` reads the tag back.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from functools import lru_cache
from typing import Literal

import snowballstemmer

from memlane.pipeline.language import analyser
from memlane.pipeline.language.detect import detect_language

Polarity = Literal[-1, 1]

# Written as prose: a list of 198 quoted words would be 200 lines of noise.
NLTK_ENGLISH_STOPWORDS: frozenset[str] = frozenset(
    str.split(
        """
        a about above after again against ain all am an and any are aren aren't as at be
        because been before being below between both but by can couldn couldn't d did didn
        didn't do does doesn doesn't doing don don't down during each few for from further
        had hadn hadn't has hasn hasn't have haven haven't having he he'd he'll her here hers
        herself he's him himself his how i i'd if i'll i'm in into is isn isn't it it'd it'll
        it's its itself i've just ll m ma me mightn mightn't more most mustn mustn't my
        myself needn needn't no nor not now o of off on once only or other our ours ourselves
        out over own re s same shan shan't she she'd she'll she's should shouldn shouldn't
        should've so some such t than that that'll the their theirs them themselves then
        there these they they'd they'll they're they've this those through to too under
        until up ve very was wasn wasn't we we'd we'll we're were weren weren't we've what
        when where which while who whom why will with won won't wouldn wouldn't y you you'd
        you'll your you're yours yourself yourselves you've
        """
    )
)

# Negations as people type them without the apostrophe; "wont" is left out (a word).
_BARE_NEGATIONS: frozenset[str] = frozenset(
    str.split(
        "dont doesnt didnt isnt arent wasnt werent cant couldnt shouldnt wouldnt hasnt"
        " havent hadnt aint mustnt neednt"
    )
)

# The subject of every memory the extractor writes ("User prefers …", "User's dog …"): a
# keyword of all of them says nothing of the topic, and it raised short statements to the
# threshold by itself ("User likes hiking on weekends" merged with "… chess on weekends":
# 3 of 5 keywords shared). On bench.dedup's store it made many of the duplicate pairs
# (bench/README.md).
SUBJECT_WORDS: frozenset[str] = frozenset({"user", "user's"})

STOPWORDS: frozenset[str] = (
    NLTK_ENGLISH_STOPWORDS
    | _BARE_NEGATIONS
    | SUBJECT_WORDS
    | frozenset({"never", "cannot", "anymore", "can't"})
)

# Markers checked on the token before stemming.
NEGATION_WORDS: frozenset[str] = frozenset(
    {"not", "no", "never", "nor", "neither", "cannot", "anymore"} | _BARE_NEGATIONS
)
# Markers checked on the stem, so "dislikes", "hated", "stopped" count.
NEGATIVE_STEMS: frozenset[str] = frozenset({"dislik", "hate", "stop", "quit"})
POSITIVE_STEMS: frozenset[str] = frozenset({"like", "love", "prefer", "enjoy", "alway"})
# Stems that say how the user stands towards a topic rather than what the topic is.
POLARITY_STEMS: frozenset[str] = NEGATIVE_STEMS | POSITIVE_STEMS
# With the other languages' (tagged, so no English keyword is among them).
ALL_POLARITY_STEMS: frozenset[str] = POLARITY_STEMS | analyser.polarity_stems()

_TOKEN = re.compile(r"[^\W_]+(?:'[^\W_]+)*")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\uff07": "'"})
_SPACE = re.compile(r"\s+")
_THE_USER = re.compile(r"^the (?=user\b)")
_TRAILING_PUNCTUATION = ".!?;:,\u2026"

# A Snowball stemmer keeps the word being stemmed in instance attributes, so one shared
# instance is not safe across threads (the HTTP door runs sync handlers in a pool).
_STEMMER = snowballstemmer.stemmer("english")
_STEMMER_LOCK = threading.Lock()


@lru_cache(maxsize=65_536)
def stem(token: str) -> str:
    """Snowball English stem of one lower-case token."""
    with _STEMMER_LOCK:
        return str(_STEMMER.stemWord(token))


def _prepare(text: str) -> str:
    return unicodedata.normalize("NFKC", text).translate(_APOSTROPHES).casefold()


def tokens(text: str) -> list[str]:
    """Word tokens of text, case-folded, in order (stopwords included)."""
    return _TOKEN.findall(_prepare(text))


def keywords(text: str, language: str | None = None) -> frozenset[str]:
    """Stemmed word tokens without stopwords; see the module docstring. `language`: the
    text's, detected when None."""
    language = language or detect_language(text)
    if language != "en":
        return analyser.keywords(text, language)
    words = tokens(text)
    found: set[str] = set()
    for index, word in enumerate(words):
        if word in STOPWORDS or word.endswith("n't"):
            continue
        if word == "longer" and index > 0 and words[index - 1] == "no":
            continue
        found.add(stem(word))
    return frozenset(found)


def topic_keywords(words: frozenset[str]) -> frozenset[str]:
    """Keywords without the polarity stems (like, dislike, prefer, always, …, and their
    tagged kin of other languages): what a statement is about, so "likes Java" and
    "dislikes Java" have the same topic."""
    return words - ALL_POLARITY_STEMS


def language_of(words: frozenset[str]) -> str:
    """The language of a keyword set: its tag ("de:tee" → "de"), "en" when untagged.
    A set's keywords are all of one text, so one of them tells."""
    for word in words:
        tag, colon, _ = word.partition(":")
        return tag if colon else "en"
    return "en"


def statement_language(text: str, words: frozenset[str]) -> str:
    """The language of a statement with its keywords: theirs, or the text's when it has
    none."""
    return language_of(words) if words else detect_language(text)


def polarity(text: str, language: str | None = None) -> Polarity:
    """−1 when text contains a negation marker, else +1 (see the module docstring).
    `language`: the text's, detected when None."""
    language = language or detect_language(text)
    if language != "en":
        return analyser.polarity(text, language)
    for word in tokens(text):
        if word in NEGATION_WORDS or word.endswith("n't"):
            return -1
        if stem(word) in NEGATIVE_STEMS:
            return -1
    return 1


def normalise(text: str) -> str:
    """The form two texts must share to be the same memory word for word: NFKC,
    case-folded, typographic apostrophes unified, whitespace collapsed, a leading "the"
    before "user" and trailing sentence punctuation (. ! ? ; : , …) removed. "+" and ")"
    are kept: "C++" ≠ "C"."""
    collapsed = _SPACE.sub(" ", _prepare(text)).strip()
    # "The user prefers X" says what "User prefers X" says (the subject is no keyword).
    collapsed = _THE_USER.sub("", collapsed)
    return collapsed.rstrip(_TRAILING_PUNCTUATION + " ")
