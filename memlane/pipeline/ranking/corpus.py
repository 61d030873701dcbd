"""A user's items indexed for relevance (`Corpus`): unit vectors of one embedder stacked in
a matrix, keyword postings and lengths, built whole (`build_corpus`, `corpus_of`) or
patched in the time of the rows a change touches (`patch_corpus`). The relevance of every
row to a query is computed over it (pipeline.ranking.relevance).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

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
