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

Items are rows of a `Corpus`; `relevance` returns one float64 per row, in row order.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from memlane.pipeline.ranking.lexical import K1, B

FloatArray = npt.NDArray[np.float64]
Matrix = npt.NDArray[np.float32]
VectorLike = Sequence[float] | npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class CorpusItem:
    """One item as relevance sees it: its id, its vector (of `model`), its keywords."""

    id: str
    keywords: frozenset[str]
    vector: VectorLike | None = None
    model: str | None = None


# A word's rows: the tuple of the list a build collects, made an array the first time a
# query reads it (6,000 arrays made at every load were ~7% of a 10k user's, ~50 ms at
# 100k; a query reads a handful of words). A tuple, not the list: the garbage collector
# stops looking at a tuple of ints after one pass, but walks a list on every collection
# of the whole heap for as long as the view lives.
Postings = npt.NDArray[np.intp] | tuple[int, ...]


@dataclass(slots=True)
class _Spare:
    """A vector matrix with room to grow, shared by the corpora patched from one another:
    `base[:used]` (by component: `base[:, :used]`) is claimed by the newest of them."""

    base: Matrix
    used: int


@dataclass(frozen=True, slots=True)
class Corpus:
    """The items of one user, indexed for relevance: unit vectors of one embedder stacked
    in a matrix (a zero row for an item without one), keyword postings, and which rows
    are alive (a row removed by `patch_corpus` stays, dead, until the next build).

    `by_component`: the matrix is stored by component (`vectors.T` is C-contiguous:
    component j of every row is one run), for an embedder whose queries have few
    components (hashing: ~15 of 256), so a query reads only those (`component_dots`).
    Otherwise by row, for dense vectors (`row_dots`)."""

    ids: tuple[str, ...]
    model: str | None
    vectors: npt.NDArray[np.float32]
    postings: dict[str, Postings]  # a word's rows, ascending (`rows_of` reads them)
    lengths: FloatArray
    keywords: tuple[Collection[str], ...] = ()  # of each row
    alive: npt.NDArray[np.bool_] | None = None  # None: every row
    _positions: dict[str, int] = field(default_factory=dict, repr=False)
    by_component: bool = False
    _spare: _Spare | None = field(default=None, repr=False)  # where appended rows go
    _gains: dict[tuple[float, float], tuple[int, FloatArray]] = field(
        default_factory=dict, repr=False
    )  # bm25's per-row gains, by (k1, b)

    def __len__(self) -> int:
        return len(self.ids)

    def positions(self) -> dict[str, int]:
        """Each id's row (built once, then shared read-only)."""
        if not self._positions and self.ids:
            self._positions.update({item_id: i for i, item_id in enumerate(self.ids)})
        return self._positions

    def position(self, item_id: str) -> int | None:
        return self.positions().get(item_id)

    @property
    def live(self) -> npt.NDArray[np.bool_]:
        return np.ones(len(self.ids), dtype=np.bool_) if self.alive is None else self.alive


def _unit_rows(vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Rows scaled to length 1; a zero, NaN or infinite row becomes no direction (zeros)."""
    return _scale_rows(vectors.astype(np.float32))


# Rows transposed per block: a block's rows stay in cache while written out by component
# (numpy's own transposing copy strides through memory: ~2.3 times the time at 100k x 256).
_BLOCK_ROWS = 256


def stored_by_component(vectors: Matrix) -> Matrix:
    """The rows of `vectors` (n × d) in a matrix stored by component: an n × d view of a
    C-contiguous d × n array (the values are the same, bit for bit)."""
    n, width = vectors.shape
    columns = np.empty((width, n), dtype=np.float32)
    for start in range(0, n, _BLOCK_ROWS):
        columns[:, start : start + _BLOCK_ROWS] = vectors[start : start + _BLOCK_ROWS].T
    return columns.T


def _scale_rows(vectors: Matrix) -> Matrix:
    """`_unit_rows` in place (a large user's matrix: each copy of it costs)."""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        usable = np.isfinite(norms) & (norms > 0)
        np.divide(vectors, np.where(usable, norms, 1), out=vectors)
        vectors[~usable[:, 0]] = 0
    return vectors


def _vector_row(item: CorpusItem, model: str | None, width: int) -> npt.NDArray[np.float32]:
    row = np.zeros(width, dtype=np.float32)
    if width and item.vector is not None and item.model == model and len(item.vector) == width:
        row[:] = item.vector
    return row


def stack_vectors(
    vectors: Sequence[tuple[str | None, VectorLike | None] | None],
    *,
    model: str | None,
    dim: int | None,
) -> tuple[Matrix, npt.NDArray[np.bool_]]:
    """`vectors[i]` is (embedder, vector) of row i, or None: the rows' vectors of `model`
    and `dim` stacked in a matrix (zeros for the other rows), and which rows have one."""
    width = dim or 0
    matrix = np.zeros((len(vectors), width), dtype=np.float32)
    mask = np.zeros(len(vectors), dtype=np.bool_)
    for row, pair in enumerate(vectors):
        if not width or pair is None:
            continue
        of, vector = pair
        if vector is not None and of == model and len(vector) == width:
            matrix[row] = vector
            mask[row] = True
    return matrix, mask


def build_corpus(
    items: Sequence[CorpusItem],
    *,
    model: str | None,
    dim: int | None,
    by_component: bool = False,
) -> Corpus:
    """Index `items` for relevance; only vectors of `model` and `dim` are kept."""
    vectors, with_vectors = stack_vectors(
        [(item.model, item.vector) for item in items], model=model, dim=dim
    )
    return corpus_of(
        tuple(item.id for item in items),
        [item.keywords for item in items],
        vectors,
        with_vectors,
        model=model,
        by_component=by_component,
    )


def corpus_of(
    ids: tuple[str, ...],
    keywords: Sequence[Collection[str]],
    vectors: Matrix,
    with_vectors: npt.NDArray[np.bool_],
    *,
    model: str | None,
    by_component: bool = False,
) -> Corpus:
    """Index items given column by column: row i is `ids[i]` with `keywords[i]` and, when
    `with_vectors[i]`, the vector `vectors[i]` of `model` (scaled to length 1 here; the
    other rows of `vectors` must be zeros). `vectors` becomes the corpus's own (or, stored
    `by_component` (Corpus), is copied so)."""
    postings: defaultdict[str, list[int]] = defaultdict(list)  # no list made per lookup
    for row, words in enumerate(keywords):
        for word in words:
            postings[word].append(row)
    if with_vectors.all():
        _scale_rows(vectors)
    elif with_vectors.any():
        vectors[with_vectors] = _scale_rows(vectors[with_vectors])
    return Corpus(
        ids=ids,
        model=model,
        # scaled first: by row, where each row is contiguous
        vectors=stored_by_component(vectors) if by_component else vectors,
        by_component=by_component,
        postings={word: tuple(rows) for word, rows in postings.items()},
        lengths=np.fromiter(map(len, keywords), dtype=np.float64, count=len(keywords)),
        keywords=tuple(keywords),
    )


def patch_corpus(
    corpus: Corpus, upserts: Sequence[CorpusItem], removed: Collection[str]
) -> tuple[Corpus, list[int]]:
    """A new corpus with `upserts` written over their rows (or appended) and the rows of
    `removed` dead; the old one is left as it was (a caller may still be ranking with
    it). Returns it and the row of each upsert.

    In the time of the rows touched, not of the corpus: only the postings of the words
    they gain or lose are rebuilt, and the vector matrix is shared with the old corpus
    unless a row's vector changed (appended rows go to spare capacity past the old
    corpus's rows, which it never reads)."""
    n_old = len(corpus.ids)
    positions = corpus.positions()
    appended = list(dict.fromkeys(item.id for item in upserts if item.id not in positions))
    # Only what the touched rows change is copied: a 10k user's ids, keywords, lengths
    # and postings copied on every change cost more than the change itself.
    ids: tuple[str, ...] = corpus.ids
    if appended:
        positions = dict(positions)
        for offset, item_id in enumerate(appended):
            positions[item_id] = n_old + offset
        ids += tuple(appended)
    n = len(ids)
    width = corpus.vectors.shape[1]
    rows_of = [positions[item.id] for item in upserts]
    new_rows: dict[int, npt.NDArray[np.float32]] = {}
    if upserts:
        stacked = np.stack([_vector_row(item, corpus.model, width) for item in upserts])
        new_rows = dict(zip(rows_of, _unit_rows(stacked), strict=True))
    gone = [row for item_id in removed if (row := positions.get(item_id)) is not None]
    # a dead row's vector stays: nothing ranks dead rows, and the old corpus shares it
    rewritten = any(
        row < n_old and not np.array_equal(vector, corpus.vectors[row])
        for row, vector in new_rows.items()
    )
    vectors, spare = _with_rows(corpus, n, copy=rewritten)
    # the keywords each touched row ends with
    final = {row: item.keywords for row, item in zip(rows_of, upserts, strict=True)}
    for row in gone:
        final[row] = frozenset()
    old_keywords = corpus.keywords
    moved = {
        row: words
        for row, words in final.items()
        if row >= n_old or frozenset(old_keywords[row]) != words
    }
    keywords = old_keywords
    lengths = corpus.lengths
    postings = corpus.postings
    if moved:
        grown: list[Collection[str]] = [*old_keywords, *[frozenset()] * (n - n_old)]
        lengths = np.concatenate([corpus.lengths, np.zeros(n - n_old)])
        lose: dict[str, set[int]] = {}
        gain: dict[str, set[int]] = {}
        for row, words in moved.items():
            before = frozenset(grown[row])
            for word in before - words:
                lose.setdefault(word, set()).add(row)
            for word in words - before:
                gain.setdefault(word, set()).add(row)
            grown[row] = words
            lengths[row] = len(words)
        keywords = tuple(grown)
        postings = dict(corpus.postings)
        for word in sorted(lose.keys() | gain.keys()):
            rows = np.asarray(postings.get(word, ()), dtype=np.intp)
            if word in lose:
                rows = rows[~np.isin(rows, list(lose[word]))]
            if word in gain:
                rows = np.union1d(rows, np.fromiter(gain[word], dtype=np.intp))
            if len(rows):
                postings[word] = rows.astype(np.intp, copy=False)
            else:
                postings.pop(word, None)
    alive = np.concatenate([corpus.live, np.ones(n - n_old, dtype=np.bool_)])
    for row, vector in new_rows.items():
        if row >= n_old or rewritten:
            vectors[row] = vector
        alive[row] = True
    for row in gone:
        alive[row] = False
    patched = Corpus(
        ids=ids,
        model=corpus.model,
        vectors=vectors,
        postings=postings,
        lengths=lengths,
        keywords=keywords,
        alive=alive,
        by_component=corpus.by_component,
        _positions=positions,
        _spare=spare,
    )
    return patched, rows_of


def _with_rows(corpus: Corpus, rows: int, *, copy: bool) -> tuple[Matrix, _Spare | None]:
    """A matrix of `rows` rows beginning with the corpus's vectors (the new rows are the
    caller's to write), and the spare capacity it lives in. Without `copy` it shares the
    old rows' memory: new rows go past them in the spare capacity, which no reader of the
    old corpus sees, as long as no other corpus has claimed those rows already (a corpus
    patched twice: the second patch copies)."""
    vectors = corpus.vectors
    n_old, width = vectors.shape
    spare = corpus._spare
    # by component, the base is stored transposed (Corpus): base[j] is component j
    flip = corpus.by_component
    if not copy and spare is not None and spare.used == n_old:
        base = spare.base.T if flip else spare.base
        if len(base) >= rows:
            spare.used = rows
            grown = base[:rows]
            grown[n_old:] = 0
            return grown, spare
    if not copy and rows == n_old:
        return vectors, spare
    capacity = max(rows, n_old + n_old // 2 + 16)
    stored = np.zeros((width, capacity) if flip else (capacity, width), dtype=np.float32)
    base = stored.T if flip else stored
    base[:n_old] = vectors
    return base[:rows], _Spare(stored, rows)


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


def rows_of(corpus: Corpus, word: str) -> npt.NDArray[np.intp] | None:
    """The rows whose keywords hold `word`, ascending; None when none does. Made an
    array on first read and kept (corpora patched from one another share the postings
    of the words no patch touched: the same rows; threads racing here store equal
    arrays)."""
    rows = corpus.postings.get(word)
    if rows is None or isinstance(rows, np.ndarray):
        return rows
    made = np.asarray(rows, dtype=np.intp)
    corpus.postings[word] = made
    return made


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
