"""Relevance of every item of a user to a query: the cosine of their embeddings blended
with BM25 over their keywords, computed at once over the user's whole store.

    relevance = (1 − w) · cosine + w · bm25 / max(bm25)          (scoring.hybrid_relevance)

- cosine: of the item's and the query's vectors of one embedder, clipped to [0, 1]; 0
  for an item without a vector of the query's embedder (lexical evidence still counts).
- BM25 (pipeline.ranking.lexical's formula, k1 1.2, b 0.75) over keyword sets (stemmed words
  without stopwords, pipeline.dedup.keywords), so tf is 1 and a document's length is its
  number of keywords. The statistics (N, each term's document frequency, the mean
  length) are the user's whole store's, memories and episodes and procedures alike: a
  word rare among what the user said weighs more than one in half of it.
- Normalised by the best score of the store, so the best lexical match is 1.0; with no
  match at all there is no lexical signal and relevance is the cosine alone.

Items are rows of a `Corpus` (pipeline.ranking.corpus); `relevance` returns one float64 per
row, in row order.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

import numpy as np

from memlane.pipeline.ranking.corpus import Corpus, FloatArray, Matrix, rows_of
from memlane.pipeline.ranking.lexical import K1, B


def row_dots(matrix: Matrix, vector: Matrix) -> Matrix:
    """`matrix @ vector`, computed by numpy's own loop in the calling thread. `@` hands
    it to the BLAS library, whose threads (OpenBLAS: one per core) spin between calls:
    on a 2-core machine shared with other processes the threaded product cost several
    times this loop's CPU (bench/README.md), and the spinning threads take the cores from
    the request and its background threads. The result does not depend on
    the BLAS library or its thread count."""
    dots: Matrix = np.einsum("ij,j->i", matrix, vector)
    return dots


def cosines(corpus: Corpus, query_vector: Sequence[float] | None, model: str | None) -> FloatArray:
    """Each row's cosine with the query in [0, 1]; zeros when the query has no vector of
    the corpus's embedder."""
    n, width = corpus.vectors.shape
    if query_vector is None or model != corpus.model or len(query_vector) != width or not n:
        return np.zeros(n, dtype=np.float64)
    query = np.asarray(query_vector, dtype=np.float64)
    norm = float(np.linalg.norm(query))
    if norm == 0 or not math.isfinite(norm):
        return np.zeros(n, dtype=np.float64)
    unit = (query / norm).astype(np.float32)
    dots = component_dots if corpus.by_component else row_dots
    sims = dots(corpus.vectors, unit).astype(np.float64)
    # NaN 0 (fmax passes over it), then clipped to [0, 1]; in place: at 100k rows each
    # temporary is 0.8 MB of fresh pages (nan_to_num's made four)
    np.fmax(sims, 0.0, out=sims)
    return np.minimum(sims, 1.0, out=sims)


def component_dots(matrix: Matrix, vector: Matrix) -> Matrix:
    """`matrix @ vector` for a matrix stored by component (`stored_by_component`),
    reading only the components where `vector` is not zero: a hashing query has ~15 of
    256, so a 100k user's scan reads ~6 MB instead of 100 MB (bench/README.md).

    Each row's dot is the float32 sum of its products taken component by component in
    ascending order (float32 products: 1e-7 of a cosine, far below any score's step),
    one ufunc pass per component over every row. A component the query lacks would add
    ±0, which leaves every partial sum as it was, so skipping it changes no bit: a row's
    dot depends on its own values and the query alone, not on its position, the number
    of rows or the thread count. (`np.einsum` picks its loop by the operands' shapes: for
    one row it sums in another order.)"""
    (touched,) = np.nonzero(vector)
    columns = matrix.T
    dots = np.zeros(len(matrix), dtype=np.float32)
    product = np.empty_like(dots)
    for j in touched.tolist():
        np.multiply(columns[j], vector[j], out=product)
        np.add(dots, product, out=dots)
    return dots


def bm25(corpus: Corpus, terms: Collection[str], *, k1: float = K1, b: float = B) -> FloatArray:
    """BM25 of every row for the query's terms (module docstring); 0 for no match."""
    scores = np.zeros(len(corpus), dtype=np.float64)
    n, gain = _bm25_gain(corpus, k1, b)
    if not n:
        return scores
    for term in sorted(set(terms)):  # one order of the sum in every process (str hashes vary)
        rows = rows_of(corpus, term)
        if rows is None:
            continue
        df = len(rows)
        idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        scores[rows] += idf * gain[rows]
    return scores


def _bm25_gain(corpus: Corpus, k1: float, b: float) -> tuple[int, FloatArray]:
    """The live rows' count and each row's BM25 gain for a matching term: the same for
    every query to a corpus, so computed once per corpus (over a 100k-row corpus, ~0.5 ms
    of every assembly)."""
    known = corpus._gains.get((k1, b))
    if known is not None:
        return known
    live = corpus.live
    n = int(live.sum())
    if not n:
        return n, np.zeros(0)
    avgdl = float(corpus.lengths[live].mean()) or 1.0
    norm = k1 * (1.0 - b + b * corpus.lengths / avgdl)
    gain = (k1 + 1.0) / (1.0 + norm)  # tf is 1: keyword sets
    corpus._gains[(k1, b)] = (n, gain)  # threads racing here store equal values
    return n, gain


def relevance(
    corpus: Corpus,
    *,
    query_vector: Sequence[float] | None,
    query_model: str | None,
    query_terms: Collection[str],
    lexical_weight: float,
) -> FloatArray:
    """The blended relevance of every row (module docstring), in [0, 1]."""
    cosine = cosines(corpus, query_vector, query_model)
    if lexical_weight <= 0:
        return cosine
    lexical = bm25(corpus, query_terms)
    top = float(lexical.max()) if len(lexical) else 0.0
    if not top > 0:
        return cosine
    w = min(1.0, lexical_weight)
    # (1 − w) · cosine + w · (lexical / top), in place in the two fresh arrays
    cosine *= 1.0 - w
    lexical /= top
    lexical *= w
    cosine += lexical
    return cosine
