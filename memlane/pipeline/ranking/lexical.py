"""Lexical relevance: BM25 over a small set of documents, and the normalisation that puts
any lexical score (BM25, PostgreSQL's ts_rank_cd) on [0, 1] before it is blended with
cosine (`memlane.pipeline.ranking.scoring.hybrid_relevance`).

BM25 (Robertson–Spärck Jones, with Lucene's non-negative idf):

    idf(t)      = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))
    score(d, q) = Σ_{t ∈ q} idf(t) · tf · (k1 + 1) / (tf + k1 · (1 − b + b · |d| / avgdl))

with tf = tf(t, d) the count of t in d, N the number of documents given, df(t) how many
of them contain t, |d| the document's length in terms, avgdl the mean length; k1 = 1.2,
b = 0.75. A query term is counted once however often the query repeats it. The collection
is whatever the caller passes: for the assembler, the candidate set of one assembly, so a
word rare among the user's candidates weighs more than a word most of them share.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Mapping, Sequence

K1 = 1.2
B = 0.75


def bm25_scores(
    query_terms: Collection[str],
    documents: Mapping[str, Sequence[str]],
    *,
    k1: float = K1,
    b: float = B,
) -> dict[str, float]:
    """BM25 of each document (id → its terms, in any order) for the query; only documents
    that share at least one term with the query appear in the result."""
    terms = sorted(set(query_terms))  # summed in one order in every process (str hashes vary)
    if not terms or not documents:
        return {}
    n = len(documents)
    counts = {doc_id: Counter(words) for doc_id, words in documents.items()}
    lengths = {doc_id: len(words) for doc_id, words in documents.items()}
    avgdl = sum(lengths.values()) / n or 1.0
    df = Counter(t for tf in counts.values() for t in terms if t in tf)
    idf = {t: math.log(1.0 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms}
    scores: dict[str, float] = {}
    for doc_id, tf in counts.items():
        norm = k1 * (1.0 - b + b * lengths[doc_id] / avgdl)
        score = sum(idf[t] * tf[t] * (k1 + 1.0) / (tf[t] + norm) for t in terms if t in tf)
        if score > 0.0:
            scores[doc_id] = score
    return scores


def normalise_by_max(scores: Mapping[str, float]) -> dict[str, float]:
    """score / max(scores): the best lexical match of the set gets 1.0, the others their
    share of it. Empty when no score is positive (the query matched nothing lexically):
    then there is no lexical signal, which is not the same as a signal of 0."""
    top = max(scores.values(), default=0.0)
    if not top > 0.0:  # also catches NaN
        return {}
    return {key: max(0.0, value) / top for key, value in scores.items() if value > 0.0}
