"""Keywords and polarity of a text in a language other than English.

- text: NFKC-normalised, typographic apostrophes unified, case-folded (as English).
- tokens: Chinese and Japanese by the segmenter (pipeline.language.cjk); other languages
  as English, runs of letters and digits joined by apostrophes, where French, Italian
  and Catalan split off an elided word ("l'utilisateur" → "l'", "utilisateur";
  "n'aime" → "n'", "aime").
- keywords: each token that is no stopword (pipeline.language.stopwords), no negation and
  no word for the user (pipeline.language.cues), stemmed by Snowball's stemmer of the
  language where Snowball has one (every language it has), and tagged with the
  language: "de:tee". Keywords of different languages never meet: a fact said in German
  and in French shares no keyword, so dedup compares statements within a language
  (pipeline.dedup.similarity) and BM25 matches a query in its own language.
- polarity: −1 when a token is a negation or stems to a negative cue, else +1 (English's
  rule, with each language's cues).
- polarity stems: the tagged stems of the positive and negative cues, which are how a
  statement stands towards its topic, not the topic.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from functools import cache, lru_cache
from typing import Literal

import snowballstemmer

from memlane.pipeline.language.cjk import terms as cjk_terms
from memlane.pipeline.language.cues import CUES
from memlane.pipeline.language.stopwords import stopwords

# ISO 639-1 code → Snowball algorithm (snowballstemmer.algorithms(), without English,
# whose stemming is pipeline.dedup.keywords').
SNOWBALL: dict[str, str] = {
    "ar": "arabic",
    "hy": "armenian",
    "eu": "basque",
    "ca": "catalan",
    "cs": "czech",
    "da": "danish",
    "nl": "dutch",
    "eo": "esperanto",
    "et": "estonian",
    "fi": "finnish",
    "fr": "french",
    "de": "german",
    "el": "greek",
    "hi": "hindi",
    "hu": "hungarian",
    "id": "indonesian",
    "ga": "irish",
    "it": "italian",
    "lt": "lithuanian",
    "ne": "nepali",
    "no": "norwegian",
    "nb": "norwegian",
    "nn": "norwegian",
    "fa": "persian",
    "pl": "polish",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "sr": "serbian",
    "st": "sesotho",
    "es": "spanish",
    "sv": "swedish",
    "ta": "tamil",
    "tr": "turkish",
    "yi": "yiddish",
}
CJK: frozenset[str] = frozenset({"zh", "ja"})
ELIDING: frozenset[str] = frozenset({"fr", "it", "ca"})

_TOKEN = re.compile(r"[^\W_]+(?:'[^\W_]+)*")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\uff07": "'"})
_LOCAL = threading.local()


def prepare(text: str) -> str:
    return unicodedata.normalize("NFKC", text).translate(_APOSTROPHES).casefold()


@lru_cache(maxsize=131_072)
def stem(language: str, token: str) -> str:
    """Snowball stem of one case-folded token; the token itself in a language Snowball
    has no stemmer for. One stemmer per thread and language: a Snowball stemmer keeps
    the word being stemmed in its attributes."""
    algorithm = SNOWBALL.get(language)
    if algorithm is None:
        return token
    stemmers: dict[str, snowballstemmer.stemmer] = getattr(_LOCAL, "stemmers", None) or {}
    _LOCAL.stemmers = stemmers
    stemmer = stemmers.get(algorithm)
    if stemmer is None:
        stemmer = stemmers[algorithm] = snowballstemmer.stemmer(algorithm)
    return str(stemmer.stemWord(token))


def _split_elision(token: str) -> list[str]:
    *elided, word = token.split("'")
    return [part + "'" for part in elided if part] + [word]


def tokens(text: str, language: str) -> list[str]:
    """The tokens of text in a language, in order (stopwords and cue words included)."""
    prepared = prepare(text)
    if language in CJK:
        cues = CUES[language]
        words = cues.negations | cues.negative | cues.positive
        return cjk_terms(prepared, words, stopwords(language) | cues.subject)
    found = _TOKEN.findall(prepared)
    if language in ELIDING:
        return [part for token in found for part in _split_elision(token)]
    return found


@cache
def _excluded(language: str) -> frozenset[str]:
    cues = CUES.get(language)
    extra = cues.negations | cues.subject if cues else frozenset()
    return stopwords(language) | extra


def keyword_sequence(text: str, language: str) -> list[str]:
    """The tagged keywords of text in order, repeats kept (for the hashing embedder's
    word pairs)."""
    excluded = _excluded(language)
    if language in CJK:
        return [f"{language}:{t}" for t in tokens(text, language) if t not in excluded]
    return [
        f"{language}:{stem(language, t)}"
        for t in tokens(text, language)
        if t not in excluded and not t.endswith("'")
    ]


def keywords(text: str, language: str) -> frozenset[str]:
    return frozenset(keyword_sequence(text, language))


@cache
def _negative_stems(language: str) -> frozenset[str]:
    cues = CUES.get(language)
    if cues is None:
        return frozenset()
    if language in CJK:
        return cues.negative
    return frozenset(stem(language, prepare(w)) for w in cues.negative)


def polarity(text: str, language: str) -> Literal[-1, 1]:
    cues = CUES.get(language)
    if cues is None:
        return 1
    negative = _negative_stems(language)
    for token in tokens(text, language):
        if token in cues.negations:
            return -1
        if (token if language in CJK else stem(language, token)) in negative:
            return -1
    return 1


def polarity_stems() -> frozenset[str]:
    """The tagged stems of every language's positive and negative cues."""
    found: set[str] = set()
    for language, cues in CUES.items():
        for word in cues.negative | cues.positive:
            term = word if language in CJK else stem(language, prepare(word))
            found.add(f"{language}:{term}")
    return frozenset(found)
