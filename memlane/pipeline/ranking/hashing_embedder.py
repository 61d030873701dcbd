"""A dependency-free text embedding: signed feature hashing of stemmed words and word pairs.

It knows no synonyms ("car" and "automobile" share nothing), but texts that share stemmed
words land close together, it needs no model download, and the same text gives the same
vector in every process and on every machine. It is the offline default embedder.

A text in another language than English (pipeline.language.detect) is read as its
keywords in order (pipeline.language.analyser: that language's stopwords and stemmer,
Chinese and Japanese as character pairs), tagged with the language, so its features
never collide with English words; English texts give the vectors they always gave.
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
from collections.abc import Sequence
from functools import lru_cache
from itertools import pairwise

import snowballstemmer

from memlane.pipeline.language.analyser import keyword_sequence
from memlane.pipeline.language.detect import detect_language

_TOKEN = re.compile(r"[a-z0-9]+")

# Function words that carry no topic; the same spirit as the dedup keywords, kept local so
# that changing the dedup stopwords does not silently change every stored vector.
_STOPWORD_TEXT = """
    a about above after again all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is
    it its itself just me more most my myself no nor not now of off on once only or other our
    ours ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we
    were what when where which while who whom why will with would you your yours yourself
    yourselves s t d ll m re ve"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())

# A word pair says more about a topic than either word alone, but it is also rarer; half
# weight keeps a shared pair from swamping the shared single words.
BIGRAM_WEIGHT = 0.5


# A Snowball stemmer keeps the word being stemmed in instance attributes: one instance per
# thread. Stems and buckets are cached: the same words and word pairs come back in every
# extraction (the store stage embeds each memory and episode), and stemming a word costs
# more than looking it up.
_LOCAL = threading.local()


@lru_cache(maxsize=65_536)
def _stem(word: str) -> str:
    stemmer = getattr(_LOCAL, "stemmer", None)
    if stemmer is None:
        stemmer = _LOCAL.stemmer = snowballstemmer.stemmer("english")
    return str(stemmer.stemWord(word))


def stemmed_tokens(text: str) -> list[str]:
    """Lower-cased `[a-z0-9]+` tokens without stopwords, Snowball-stemmed (English), in
    order; another language's tagged keywords in order (see the module docstring)."""
    language = detect_language(text)
    if language != "en":
        return keyword_sequence(text, language)
    return [_stem(w) for w in _TOKEN.findall(text.lower()) if w not in STOPWORDS]


@lru_cache(maxsize=131_072)
def _bucket(feature: str, dim: int) -> tuple[int, float]:
    """Index and sign of a feature: the first 8 bytes of blake2b(feature) pick the bucket,
    the 9th byte's low bit the sign. Never Python's hash(), which is salted per process."""
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=9).digest()
    index = int.from_bytes(digest[:8], "big") % dim
    return index, (1.0 if digest[8] & 1 else -1.0)


def hashing_embed(texts: Sequence[str], *, dim: int) -> list[list[float]]:
    """One vector of length `dim` per text:

        v[bucket(f)] += sign(f) · w(f)   for each unigram "u:stem" (w = 1) and each
                                          bigram "b:stem1 stem2" of adjacent tokens (w = 0.5)
        v ← v / ‖v‖₂                      (all zeros when the text has no content words)

    Cosine of two vectors then approximates the weighted overlap of their stemmed words.
    """
    if dim < 1:
        raise ValueError(f"dim must be >= 1, got {dim}")
    vectors: list[list[float]] = []
    for text in texts:
        tokens = stemmed_tokens(text)
        features = [(f"u:{t}", 1.0) for t in tokens]
        features += [(f"b:{a} {b}", BIGRAM_WEIGHT) for a, b in pairwise(tokens)]
        vector = [0.0] * dim
        for feature, weight in features:
            index, sign = _bucket(feature, dim)
            vector[index] += sign * weight
        # Only the buckets a feature touched can be non-zero: summing and dividing those
        # alone, in index order, gives the same floats as the whole vector, for less
        touched = sorted({_bucket(feature, dim)[0] for feature, _ in features})
        norm = math.sqrt(sum(vector[i] * vector[i] for i in touched))
        if norm > 0:
            for i in touched:
                vector[i] /= norm
        vectors.append(vector)
    return vectors
