"""Relevance of every item of a user to a query: the cosine of their embeddings blended
with BM25 over their keywords, computed at once over the user's whole store.

    relevance = (1 − w) · cosine + w · bm25 / max(bm25)          (scoring.hybrid_relevance)

- cosine: of the item's and the query's vectors of one embedder, clipped to [0, 1]; 0
  for an item without a vector of the query's embedder (lexical evidence still counts).
- BM25 (pipeline.lexical's formula, k1 1.2, b 0.75) over keyword sets (stemmed words
  without stopwords, pipeline.keywords), so tf is 1 and a document's length is its
  number of keywords. The statistics (N, each term's document frequency, the mean
  length) are the user's whole store's, memories and episodes and procedures alike: a
  word rare among what the user said weighs more than one in half of it.
- Normalised by the best score of the store, so the best lexical match is 1.0; with no
  match at all there is no lexical signal and relevance is the cosine alone.

Items are rows of a `Corpus`; `relevance` returns one float64 per row, in row order.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from memlane.pipeline.lexical import K1, B

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class CorpusItem:
    """One item as relevance sees it: its id, its vector (of `model`), its keywords."""

    id: str
    keywords: frozenset[str]
    vector: Sequence[float] | npt.NDArray[np.float32] | None = None
    model: str | None = None


@dataclass(frozen=True, slots=True)
class Corpus:
    """The items of one user, indexed for relevance: unit vectors of one embedder stacked
    in a matrix (a zero row for an item without one), keyword postings, and which rows
    are alive (a row removed by `patch_corpus` stays, dead, until the next build)."""

    ids: tuple[str, ...]
    model: str | None
    vectors: npt.NDArray[np.float32]
    postings: dict[str, npt.NDArray[np.intp]]
    lengths: FloatArray
    keywords: tuple[frozenset[str], ...] = ()
    alive: npt.NDArray[np.bool_] | None = None  # None: every row
    _positions: dict[str, int] = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.ids)

    def position(self, item_id: str) -> int | None:
        if not self._positions and self.ids:
            self._positions.update({item_id: i for i, item_id in enumerate(self.ids)})
        return self._positions.get(item_id)

    @property
    def live(self) -> npt.NDArray[np.bool_]:
        return np.ones(len(self.ids), dtype=np.bool_) if self.alive is None else self.alive


def _unit_rows(vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Rows scaled to length 1; a zero, NaN or infinite row becomes no direction (zeros)."""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        usable = np.isfinite(norms) & (norms > 0)
        return np.where(usable, vectors / np.where(usable, norms, 1), 0).astype(np.float32)


def _vector_row(item: CorpusItem, model: str | None, width: int) -> npt.NDArray[np.float32]:
    row = np.zeros(width, dtype=np.float32)
    if width and item.vector is not None and item.model == model and len(item.vector) == width:
        row[:] = item.vector
    return row


def build_corpus(items: Sequence[CorpusItem], *, model: str | None, dim: int | None) -> Corpus:
    """Index `items` for relevance; only vectors of `model` and `dim` are kept."""
    n = len(items)
    width = dim or 0
    vectors = np.zeros((n, width), dtype=np.float32)
    postings: dict[str, list[int]] = {}
    lengths = np.zeros(n, dtype=np.float64)
    rows_with_vectors: list[int] = []
    for row, item in enumerate(items):
        if width and item.vector is not None and item.model == model and len(item.vector) == width:
            vectors[row] = item.vector
            rows_with_vectors.append(row)
        lengths[row] = len(item.keywords)
        for word in item.keywords:
            postings.setdefault(word, []).append(row)
    if rows_with_vectors:
        vectors[rows_with_vectors] = _unit_rows(vectors[rows_with_vectors])
    return Corpus(
        ids=tuple(item.id for item in items),
        model=model,
        vectors=vectors,
        postings={word: np.asarray(rows, dtype=np.intp) for word, rows in postings.items()},
        lengths=lengths,
        keywords=tuple(item.keywords for item in items),
    )


def patch_corpus(
    corpus: Corpus, upserts: Sequence[CorpusItem], removed: Collection[str]
) -> tuple[Corpus, list[int]]:
    """A new corpus with `upserts` written over their rows (or appended) and the rows of
    `removed` dead; the old one is left as it was (a caller may still be ranking with
    it). Returns it and the row of each upsert."""
    ids = list(corpus.ids)
    positions = {item_id: i for i, item_id in enumerate(ids)}
    keywords = list(corpus.keywords)
    appended = [item for item in upserts if item.id not in positions]
    width = corpus.vectors.shape[1]
    vectors = np.concatenate([corpus.vectors, np.zeros((len(appended), width), np.float32)])
    lengths = np.concatenate([corpus.lengths, np.zeros(len(appended))])
    alive = np.concatenate([corpus.live, np.ones(len(appended), dtype=np.bool_)])
    for item in appended:
        positions[item.id] = len(ids)
        ids.append(item.id)
        keywords.append(frozenset())
    touched = {word for item in upserts for word in item.keywords}
    for item_id in [*(item.id for item in upserts), *removed]:
        row = positions.get(item_id)
        if row is not None:
            touched |= keywords[row]
    postings = dict(corpus.postings)
    changed: dict[str, set[int]] = {
        word: set(postings[word].tolist()) if word in postings else set() for word in touched
    }

    def unindex(row: int) -> None:
        for word in keywords[row]:
            changed[word].discard(row)

    rows_of = []
    for item in upserts:
        row = positions[item.id]
        unindex(row)
        keywords[row] = item.keywords
        for word in item.keywords:
            changed[word].add(row)
        lengths[row] = len(item.keywords)
        vectors[row] = _unit_rows(_vector_row(item, corpus.model, width)[None, :])[0]
        alive[row] = True
        rows_of.append(row)
    for item_id in removed:
        row = positions.get(item_id)
        if row is None:
            continue
        unindex(row)
        keywords[row] = frozenset()
        lengths[row] = 0
        vectors[row] = 0
        alive[row] = False
    for word, rows in changed.items():
        if rows:
            postings[word] = np.asarray(sorted(rows), dtype=np.intp)
        else:
            postings.pop(word, None)
    patched = Corpus(
        ids=tuple(ids),
        model=corpus.model,
        vectors=vectors,
        postings=postings,
        lengths=lengths,
        keywords=tuple(keywords),
        alive=alive,
    )
    patched._positions.update(positions)
    return patched, rows_of


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
    # float32 products (the matrix is float32; a float64 copy of it would cost more than
    # the product), summed as float32: 1e-7 of a cosine, far below any score's step.
    sims = (corpus.vectors @ (query / norm).astype(np.float32)).astype(np.float64)
    return np.clip(np.nan_to_num(sims, nan=0.0), 0.0, 1.0)


def bm25(corpus: Corpus, terms: Collection[str], *, k1: float = K1, b: float = B) -> FloatArray:
    """BM25 of every row for the query's terms (module docstring); 0 for no match."""
    scores = np.zeros(len(corpus), dtype=np.float64)
    live = corpus.live
    n = int(live.sum())
    if not n:
        return scores
    avgdl = float(corpus.lengths[live].mean()) or 1.0
    norm = k1 * (1.0 - b + b * corpus.lengths / avgdl)
    gain = (k1 + 1.0) / (1.0 + norm)  # tf is 1: keyword sets
    for term in set(terms):
        rows = corpus.postings.get(term)
        if rows is None:
            continue
        df = len(rows)
        idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        scores[rows] += idf * gain[rows]
    return scores


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
    return np.asarray((1.0 - w) * cosine + w * (lexical / top), dtype=np.float64)
