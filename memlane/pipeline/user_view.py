"""One user's items as the assembler ranks them: the records, the relevance index over
all of them (memories, episodes and procedures in one Corpus) and the columns the
composite score needs, so a query ranks the whole store at once (numpy) and only a
shortlist of it goes through the assembler's item-by-item rules.

The shortlist holds every pinned and verified memory, and the best of the rest in the
assembler's own order (assembly rule 4 with a query, the strategy's order without one):
at most `limit`, and with a budget, as many as it takes for their lines, estimated from
each item's length, to fill `walk_margin` budgets, so the assembler's walk usually ends
before the shortlist does; pipeline.exact_walk walks on past it when it does not, with
the ranked rows the shortlist leaves (`Shortlist.rest`). Only the rows kept are sorted
(pipeline.top_k). Of the memories the
safety filter leaves out (expired, sensitive), those the walk would have reached come
too, so the pack names what was kept out of this context; naming every one, on every
assembly, made the pack of a 100k user list ~2,000 of them.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from memlane.pipeline import context_format as fmt
from memlane.pipeline import walk_rows
from memlane.pipeline.budget import MIN_MEMORY_LINE_TOKENS
from memlane.pipeline.keywords import keywords
from memlane.pipeline.line_bound import runs
from memlane.pipeline.memory_table import LazyRecords, MemoryTable, Record, Vectors
from memlane.pipeline.records import EpisodeRecord, MemoryRecord, Procedure, SoulBlock
from memlane.pipeline.relevance import (
    Corpus,
    CorpusItem,
    corpus_of,
    patch_corpus,
    relevance,
    stack_vectors,
)
from memlane.pipeline.scoring import ITEM_IMPORTANCE, Strategy, Weights
from memlane.pipeline.top_k import lexicographic_top

FloatArray = npt.NDArray[np.float64]

# The ranked part of a shortlist ends where its lines, estimated from each item's length
# (a quarter token per character, plus the style's least markup), add up to `walk_margin`
# budgets (MEMLANE_WALK_MARGIN): far enough that the walk seldom has to go on past it
# (pipeline.exact_walk), each going on costing a second assembly. Never fewer than
# MIN_WALK items.
MIN_WALK = 50


def episode_keywords(episode: EpisodeRecord) -> frozenset[str]:
    return keywords(" ".join([fmt.episode_text(episode), *episode.topics]))


def procedure_keywords(procedure: Procedure) -> frozenset[str]:
    return frozenset(procedure.keywords) | keywords(procedure.name)


def _epoch(moment: datetime) -> float:
    return moment.timestamp()


@dataclass(frozen=True, slots=True)
class Shortlist:
    memories: list[MemoryRecord]
    episodes: list[EpisodeRecord]
    procedures: list[Procedure]
    relevance: dict[str, float]
    # For pipeline.exact_walk: the ranked rows not walked; the ids of those walked though
    # the ranking may put them after a row not walked (`added`); the ranking's keys; the
    # rows the shortlist holds; the excluded memories' rows.
    rest: npt.NDArray[np.intp] = field(default_factory=lambda: np.empty(0, np.intp), compare=False)
    added: frozenset[str] = frozenset()
    ranking: walk_rows.Ranking | None = field(default=None, compare=False)
    kept: tuple[int, ...] = ()
    excluded: npt.NDArray[np.intp] = field(
        default_factory=lambda: np.empty(0, np.intp), compare=False
    )
    scores: FloatArray | None = field(default=None, compare=False)  # each row's, as given


MEMORY, EPISODE, PROCEDURE = 0, 1, 2


def _kind(record: Record) -> int:
    if isinstance(record, MemoryRecord):
        return MEMORY
    return EPISODE if isinstance(record, EpisodeRecord) else PROCEDURE


def _keywords(record: Record) -> frozenset[str]:
    if isinstance(record, MemoryRecord):
        return record.keywords
    if isinstance(record, EpisodeRecord):
        return episode_keywords(record)
    return procedure_keywords(record)


def _corpus_item(record: Record, vectors: Vectors) -> CorpusItem:
    vector, model = (vectors[1], vectors[0]) if vectors else (None, None)
    return CorpusItem(record.id, _keywords(record), vector, model)


# What a removed item's row is left with: nothing ranks it.
_DEAD = {"free": 0, "kind": -1, "chars": 0, "runs": 0}

# What a view holds beside its arrays, measured with tracemalloc on loaded views of 1k,
# 10k and 100k memories (bench/README.md): ~1,750 bytes a row beside its text (ids,
# keywords as the JSON parse made them, the columns a record is built from), and ~4 KB
# for each record built.
ROW_BYTES = 1750
RECORD_BYTES = 4096

# UserView's per-row fields, in the order `_columns` fills them.
COLUMNS = (
    "importance",
    "raw_importance",
    "stated",
    "created",
    "confirmations",
    "expires",
    "sensitive",
    "free",
    "kind",
    "chars",
    "runs",
)


def _ordered_before(
    keys: Sequence[FloatArray], rows: npt.NDArray[np.intp], last: int
) -> npt.NDArray[np.intp]:
    """The `rows` whose keys come before those of row `last` in lexicographic order
    (keys[0] the most significant; ties by row, as `lexicographic_top` breaks them)."""
    before = rows < last
    for key in reversed(keys):
        mine, theirs = key[rows], key[last]
        before = (mine < theirs) | ((mine == theirs) & before)
    return rows[before]


def _chars(record: EpisodeRecord | Procedure) -> int:
    if isinstance(record, EpisodeRecord):
        return len(fmt.episode_text(record))
    return len(record.name) + len(record.content)


def _runs(record: EpisodeRecord | Procedure) -> int:
    if isinstance(record, EpisodeRecord):
        return runs(fmt.episode_text(record))
    return runs(record.content)


def _recounted(counts: FloatArray, rows: Sequence[int], length: int) -> FloatArray:
    """A copy of line token `counts` `length` rows long, the `rows` rewritten unknown."""
    copy = np.concatenate([counts, np.full(length - len(counts), np.nan)])
    copy[list(rows)] = np.nan
    return copy


def _memory_columns(table: MemoryTable) -> dict[str, npt.NDArray[np.float64]]:
    """UserView's fields of the table's rows (the same float64 operations as on Python
    floats)."""
    return {
        "importance": table.importance * (0.5 + 0.5 * table.confidence),
        "raw_importance": table.importance,
        "stated": table.stated,
        "created": table.created,
        "confirmations": table.confirmations,
        "expires": table.expires,
        "sensitive": table.sensitive.astype(np.float64),
        "free": table.free.astype(np.float64),
        "kind": np.full(len(table), float(MEMORY)),
        "chars": table.chars,
        "runs": table.runs,
    }


def _row(record: Record) -> tuple[float, ...]:
    """A record's values of COLUMNS (a memory's as `_memory_columns` computes them: the
    same float64 operations)."""
    if isinstance(record, MemoryRecord):
        return (
            record.importance * (0.5 + 0.5 * record.confidence),
            record.importance,
            _epoch_or_never(record.confirmed_at),
            _epoch_or_never(record.created_at),
            record.access_count,
            _epoch_or_never(record.expires_at),
            record.sensitive,
            record.tier == "candidate",
            MEMORY,
            len(record.content),
            runs(record.content),
        )
    created = _epoch(record.created_at)
    return (
        ITEM_IMPORTANCE,
        0.0,
        created,
        created,
        0,
        math.inf,
        0,
        1,
        _kind(record),
        _chars(record),
        _runs(record),
    )


def _epoch_or_never(moment: datetime | None) -> float:
    return math.inf if moment is None else moment.timestamp()


def _columns(records: Sequence[Record]) -> dict[str, npt.NDArray[np.float64]]:
    """The per-row values the composite and the filters need (UserView's fields); built
    row by row in Python: a patch's few rows cost less so than as a MemoryTable."""
    table = np.array([_row(record) for record in records], dtype=np.float64)
    table = table.reshape(len(records), len(COLUMNS))
    return {name: table[:, i] for i, name in enumerate(COLUMNS)}


@dataclass(frozen=True, slots=True)
class UserView:
    """A user's items by corpus row (`records[i]` is row i of `corpus`), with the columns
    the ranking needs. Immutable: `patch` returns a new view, so a caller still ranking
    with the old one is not disturbed."""

    records: LazyRecords
    soul_blocks: tuple[SoulBlock, ...]
    corpus: Corpus
    importance: FloatArray  # importance × (0.5 + 0.5 · confidence), 0.5 for the others
    raw_importance: FloatArray  # memories' importance, 0 for the others
    stated: FloatArray  # epoch seconds: confirmed_at of memories, created_at of the rest
    created: FloatArray  # epoch seconds of created_at
    confirmations: FloatArray  # access_count of memories, 0 for the rest
    expires: FloatArray  # epoch seconds, +inf when never
    sensitive: npt.NDArray[np.bool_]
    free: npt.NDArray[np.bool_]  # candidate-tier memories, episodes, procedures
    kind: npt.NDArray[np.int8]  # MEMORY, EPISODE or PROCEDURE
    chars: FloatArray  # characters of the item's text, for its line's estimated tokens
    runs: FloatArray  # run starts of its text, for its line's least tokens (line_bound)
    # Each row's line tokens by (encoding, style), NaN until pipeline.exact_walk counts
    # them (a row's line does not change while its record does not): written by
    # assemblies, a row at a time, each writing the same value.
    line_tokens: dict[tuple[object, str], FloatArray] = field(
        default_factory=dict, compare=False, repr=False
    )

    @classmethod
    def build(
        cls,
        *,
        memories: Sequence[MemoryRecord],
        memory_vectors: Sequence[Vectors],
        episodes: Sequence[EpisodeRecord],
        episode_vectors: Sequence[Vectors],
        procedures: Sequence[Procedure],
        soul_blocks: Sequence[SoulBlock],
        model: str | None,
        dim: int | None,
    ) -> UserView:
        """Index the items; `*_vectors[i]` is (embedder, vector) of item i, or None. Only
        vectors of the embedder `model` (of `dim`) count."""
        return cls.load(
            memories=MemoryTable.of_records(memories, memory_vectors, model=model, dim=dim),
            episodes=episodes,
            episode_vectors=episode_vectors,
            procedures=procedures,
            soul_blocks=soul_blocks,
            model=model,
            dim=dim,
        )

    @classmethod
    def load(
        cls,
        *,
        memories: MemoryTable,
        episodes: Sequence[EpisodeRecord],
        episode_vectors: Sequence[Vectors],
        procedures: Sequence[Procedure],
        soul_blocks: Sequence[SoulBlock],
        model: str | None,
        dim: int | None,
    ) -> UserView:
        """Index a table of memories (its vectors of `model`, of `dim`) and the other
        items, as `build` does; a memory's record is built when first read."""
        others: list[Record] = [*episodes, *procedures]
        vectors, with_vectors = stack_vectors(
            [*episode_vectors, *([None] * len(procedures))], model=model, dim=dim
        )
        corpus = corpus_of(
            memories.ids + tuple(record.id for record in others),
            [*memories.keywords, *map(_keywords, others)],
            np.concatenate([memories.vectors, vectors]),
            np.concatenate([memories.with_vectors, with_vectors]),
            model=model,
        )
        n = len(memories)
        mine, theirs = _memory_columns(memories), _columns(others)
        columns = {name: np.concatenate([mine[name], theirs[name]]) for name in COLUMNS}
        records = LazyRecords([*([None] * n), *others], memories.record)
        return cls._of(records, tuple(soul_blocks), corpus, columns)

    @classmethod
    def _of(
        cls,
        records: LazyRecords,
        soul_blocks: tuple[SoulBlock, ...],
        corpus: Corpus,
        columns: dict[str, npt.NDArray[np.float64]],
    ) -> UserView:
        typed = {"sensitive": np.bool_, "free": np.bool_, "kind": np.int8}
        return cls(
            records=records,
            soul_blocks=soul_blocks,
            corpus=corpus,
            **{  # type: ignore[arg-type]  # the columns, each its field's type
                name: values.astype(typed.get(name, np.float64)) for name, values in columns.items()
            },
        )

    def patch(
        self,
        upserts: Sequence[tuple[Record, Vectors]],
        removed: Collection[str],
        soul_blocks: Sequence[SoulBlock],
    ) -> UserView:
        """This view with `upserts` written over their rows (or appended) and the items
        `removed` taken out: a change applied in the time of the rows it touches."""
        corpus, rows = patch_corpus(self.corpus, [_corpus_item(r, v) for r, v in upserts], removed)
        grown = len(corpus) - len(self.records)
        fresh = _columns([record for record, _ in upserts])
        dead = [at for item_id in removed if (at := corpus.position(item_id)) is not None]
        columns: dict[str, npt.NDArray[Any]] = {}
        for name in COLUMNS:
            column, values = getattr(self, name), fresh[name]
            unchanged = not grown and np.array_equal(column[rows], values.astype(column.dtype))
            if unchanged and not (dead and name in _DEAD):
                columns[name] = column  # shared with this view: neither ever writes it
                continue
            # copied once, in its own type (the rows are few, the columns long)
            column = np.concatenate([column, np.zeros(grown, column.dtype)])
            for i, row in enumerate(rows):  # in order: a row written twice keeps its last
                column[row] = values[i]
            columns[name] = column
        for at in dead:
            for name, value in _DEAD.items():
                columns[name][at] = value
        # in order: a row written twice keeps its last
        records = self.records.with_rows(
            {row: record for row, (record, _) in zip(rows, upserts, strict=True)}, len(corpus)
        )
        return UserView(
            records=records,  # dead rows hold their last record
            soul_blocks=tuple(soul_blocks),
            corpus=corpus,
            **columns,  # type: ignore[arg-type]
            line_tokens={
                key: _recounted(counts, rows, len(corpus))
                for key, counts in self.line_tokens.items()
            },
        )

    def _rows_of(self, kind: int) -> list[Record]:
        live = self.corpus.live
        return [r for i, r in enumerate(self.records) if self.kind[i] == kind and live[i]]

    @property
    def memories(self) -> list[MemoryRecord]:
        return [r for r in self._rows_of(MEMORY) if isinstance(r, MemoryRecord)]

    @property
    def episodes(self) -> list[EpisodeRecord]:
        return [r for r in self._rows_of(EPISODE) if isinstance(r, EpisodeRecord)]

    @property
    def procedures(self) -> list[Procedure]:
        return [r for r in self._rows_of(PROCEDURE) if isinstance(r, Procedure)]

    def _walked(self, ranked: npt.NDArray[np.intp], walk_tokens: float, style: str) -> int:
        """How many of `ranked` the assembler may walk: until their estimated lines add up
        to `walk_tokens`, at least MIN_WALK."""
        lines = MIN_MEMORY_LINE_TOKENS[style] + self.chars[ranked] / 4
        enough = int(np.searchsorted(np.cumsum(lines), walk_tokens)) + 1
        return max(MIN_WALK, enough)

    def shortlist_size(self, budget_tokens: int, style: str, walk_margin: float) -> int:
        """The most ranked items a shortlist can hold: as many as `walk_margin` budgets hold
        at the style's least markup and no text (every item when the margin is 0)."""
        if walk_margin <= 0:
            return len(self.corpus)
        lines = walk_margin * budget_tokens / MIN_MEMORY_LINE_TOKENS[style]
        return max(MIN_WALK, math.ceil(lines) + 1)

    @property
    def size_bytes(self) -> int:
        """About what the view holds in memory once loaded: its arrays, its rows' text,
        ids and keywords (ROW_BYTES a row beside the text); the records built as
        assemblies read them add RECORD_BYTES each (`records.made`)."""
        arrays = self.corpus.vectors.nbytes + 8 * (len(COLUMNS) + 1) * len(self.corpus)
        return arrays + int(self.chars.sum()) + ROW_BYTES * len(self.corpus)

    def relevance(
        self,
        *,
        query_vector: Sequence[float] | None,
        query_model: str | None,
        query_terms: Collection[str],
        lexical_weight: float,
    ) -> FloatArray:
        """Each row's relevance to the query (pipeline.relevance)."""
        return relevance(
            self.corpus,
            query_vector=query_vector,
            query_model=query_model,
            query_terms=query_terms,
            lexical_weight=lexical_weight,
        )

    def shortlist(
        self,
        relevance: FloatArray | None,
        *,
        strategy: Strategy,
        now: datetime,
        weights: Weights,
        half_life_hours: float,
        relevance_floor: float,
        include_sensitive: bool,
        limit: int,
        walk_tokens: float | None = None,
        style: str = "default",
    ) -> Shortlist:
        """What the assembler needs to see of this user (module docstring). With
        `walk_tokens`, the ranked part ends sooner: where its lines, estimated from each
        item's length in `style`, add up to that many tokens (at least MIN_WALK items)."""
        rows = len(self.corpus)
        live = self.corpus.live
        rel = np.zeros(rows, dtype=np.float64) if relevance is None else relevance
        # as the assembler reads a relevance (scoring.unit_interval): NaN 0, then clipped
        clipped = np.clip(np.nan_to_num(rel, nan=0.0), 0.0, 1.0)
        hours = np.maximum(0.0, (_epoch(now) - self.stated) / 3600.0)
        recency = np.exp(-math.log(2) * hours / half_life_hours)
        frequency = np.minimum(1.0, np.log10(self.confirmations + 1.0) / 2.0)
        composite = (
            weights.relevance * clipped
            + weights.importance * self.importance
            + weights.recency * recency
            + weights.frequency * frequency
        )
        is_memory = live & (self.kind == MEMORY)
        visible = (self.expires > _epoch(now)) & (include_sensitive | ~self.sensitive)
        always = is_memory & ~self.free  # pinned, verified
        excluded = is_memory & self.free & ~visible  # expired or sensitive: the pack's
        extra: set[int] = set()
        # what a composite is computed from: rows equal in all are tied for the assembler
        scored_by = (clipped, self.importance, self.stated, self.confirmations)
        if relevance is not None and strategy == "scored":
            # the assembler's pool: procedures with any relevance (theirs is truthy)
            pool = live & self.free & visible & ((self.kind != PROCEDURE) | (rel != 0))
            best = float(clipped[pool].max()) if pool.any() else 0.0
            above = clipped >= relevance_floor * best
            # assembly rule 4: above the floor by composite, then the rest by relevance;
            # composites may differ from the assembler's in their last bits
            primary = np.where(above, 0.0, 1.0)
            secondary = np.where(above, -composite, -clipped)
            ranking = walk_rows.Ranking(
                (primary, secondary, -composite), (False, above, True), scored_by
            )
        else:
            pool = self.free & visible & is_memory
            if strategy == "important":
                ranking = walk_rows.Ranking(
                    (-self.raw_importance,), (False,), (self.raw_importance,)
                )
            elif strategy == "balanced":
                age = np.maximum(0.0, (_epoch(now) - self.created) / 3600.0)
                value = self.raw_importance / (1.0 + age)
                ranking = walk_rows.Ranking((-value,), (True,), (self.raw_importance, self.created))
            else:
                ranking = walk_rows.Ranking((-composite,), (True,), scored_by)
            # every episode: the walk after the memories takes any that fits, oldest too
            extra = set(np.flatnonzero(live & (self.kind != MEMORY)).tolist())
        keys = ranking.keys
        in_pool = np.flatnonzero(pool)
        ranked = in_pool[lexicographic_top([key[in_pool] for key in keys], limit)]
        if walk_tokens is not None:
            ranked = ranked[: self._walked(ranked, walk_tokens, style)]
        walked, added = walk_rows.walked(
            self,
            in_pool,
            ranked,
            ranking,
            clipped if relevance is not None and strategy == "scored" else None,
        )
        outside = np.ones(rows, dtype=np.bool_)
        outside[walked] = False
        rest = in_pool[outside[in_pool]]
        before = np.empty(0, np.intp)
        if len(ranked):
            # the excluded memories the walk would have reached: the pack names them
            before = _ordered_before(list(keys), np.flatnonzero(excluded), int(ranked[-1]))
        kept = set(walked.tolist()) | set(np.flatnonzero(always).tolist()) | set(before.tolist())
        keep = sorted(kept | extra)
        return self._shortlist(
            keep,
            relevance,
            rest=rest,
            added=frozenset(self.corpus.ids[i] for i in added),
            ranking=ranking,
            excluded=np.flatnonzero(excluded),
        )

    def widen(self, shortlist: Shortlist, more: npt.NDArray[np.intp]) -> Shortlist:
        """`shortlist` with the ranked rows `more` too, and the excluded memories ranked
        before the last of them."""
        assert shortlist.ranking is not None  # a shortlist of rows not walked has one
        keys = shortlist.ranking.keys
        last = int(more[np.lexsort(tuple(key[more] for key in reversed(keys)))[-1]])
        before = _ordered_before(list(keys), shortlist.excluded, last)
        keep = sorted(set(shortlist.kept) | set(more.tolist()) | set(before.tolist()))
        return self._shortlist(
            keep,
            shortlist.scores,
            rest=np.empty(0, np.intp),
            added=shortlist.added,
            ranking=shortlist.ranking,
            excluded=shortlist.excluded,
        )

    def _shortlist(
        self,
        keep: list[int],
        relevance: FloatArray | None,
        *,
        rest: npt.NDArray[np.intp],
        added: frozenset[str],
        ranking: walk_rows.Ranking | None,
        excluded: npt.NDArray[np.intp],
    ) -> Shortlist:
        ids = self.corpus.ids
        chosen = [self.records[i] for i in keep]
        return Shortlist(
            memories=[r for r in chosen if isinstance(r, MemoryRecord)],
            episodes=[r for r in chosen if isinstance(r, EpisodeRecord)],
            procedures=[r for r in chosen if isinstance(r, Procedure)],
            relevance={} if relevance is None else {ids[i]: float(relevance[i]) for i in keep},
            rest=rest,
            added=added,
            ranking=ranking,
            kept=tuple(keep),
            excluded=excluded,
            scores=relevance,
        )
