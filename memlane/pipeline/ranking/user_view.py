"""One user's items as the assembler ranks them: the records, the relevance index over
all of them (memories, episodes and procedures in one Corpus) and the columns the
composite score needs, so a query ranks the whole store at once (numpy) and only a
shortlist of it (pipeline.shortlist) goes through the assembler's item-by-item rules.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from memlane.pipeline.assembly import context_format as fmt
from memlane.pipeline.assembly.line_bound import runs
from memlane.pipeline.dedup.keywords import keywords
from memlane.pipeline.ranking.corpus import (
    Corpus,
    CorpusItem,
    corpus_of,
    patch_corpus,
    stack_vectors,
)
from memlane.pipeline.ranking.memory_table import LazyRecords, MemoryTable, Record, Vectors
from memlane.pipeline.ranking.relevance import relevance
from memlane.pipeline.ranking.scoring import ITEM_IMPORTANCE
from memlane.pipeline.records import EpisodeRecord, MemoryRecord, Procedure, SoulBlock

FloatArray = npt.NDArray[np.float64]


def episode_keywords(episode: EpisodeRecord) -> frozenset[str]:
    return keywords(" ".join([fmt.episode_text(episode), *episode.topics]))


def procedure_keywords(procedure: Procedure) -> frozenset[str]:
    return frozenset(procedure.keywords) | keywords(procedure.name)


def epoch(moment: datetime) -> float:
    return moment.timestamp()


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
_DEAD = {"free": 0, "kind": -1, "chars": 0, "runs": 0, "ref": math.nan}

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
    "ref",
)


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
        "ref": table.refs,
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
            _ref(record),
        )
    created = epoch(record.created_at)
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
        _ref(record),
    )


def _ref(record: Record) -> float:
    return math.nan if record.ref is None else record.ref


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
    ref: FloatArray  # the item's ref, NaN when none: its line's id (line_bound.markup_extra)
    # Each row's line tokens by (encoding, style), NaN until pipeline.assembly.exact_walk counts
    # them (a row's line does not change while its record does not): written by
    # assemblies, a row at a time, each writing the same value.
    line_tokens: dict[tuple[object, str], FloatArray] = field(
        default_factory=dict, compare=False, repr=False
    )
    # Per-row values computed from the columns alone, on first use (pipeline.assembly.shortlists):
    # a view never changes, a patch makes a new one.
    derived: dict[object, FloatArray] = field(default_factory=dict, compare=False, repr=False)
    # A memory's reply's id (None: none), as the store said while this view was current
    # (pipeline.assembly.replies.from_view): any write to the user makes a new view, so a new
    # line said after one that asked is seen.
    replies: dict[str, str | None] = field(default_factory=dict, compare=False, repr=False)

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
        by_component: bool = False,
    ) -> UserView:
        """Index the items; `*_vectors[i]` is (embedder, vector) of item i, or None. Only
        vectors of the embedder `model` (of `dim`) count; `by_component`: stored so
        (pipeline.ranking.corpus.Corpus), for an embedder of sparse vectors."""
        return cls.load(
            memories=MemoryTable.of_records(memories, memory_vectors, model=model, dim=dim),
            episodes=episodes,
            episode_vectors=episode_vectors,
            procedures=procedures,
            soul_blocks=soul_blocks,
            model=model,
            dim=dim,
            by_component=by_component,
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
        by_component: bool = False,
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
            by_component=by_component,
        )
        n = len(memories)
        mine, theirs = _memory_columns(memories), _columns(others)
        columns = {name: np.concatenate([mine[name], theirs[name]]) for name in COLUMNS}
        records = LazyRecords(
            [*([None] * n), *others], memories.record, line_fields=memories.line_fields
        )
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

    @property
    def size_bytes(self) -> int:
        """About what the view holds in memory once loaded: its arrays, its rows' text,
        ids and keywords (ROW_BYTES a row beside the text); the records built as
        assemblies read them add RECORD_BYTES each (`records.made`)."""
        # the columns, BM25's per-row gains and two `derived` arrays, 8 bytes a row each
        arrays = self.corpus.vectors.nbytes + 8 * (len(COLUMNS) + 3) * len(self.corpus)
        return arrays + int(self.chars.sum()) + ROW_BYTES * len(self.corpus)

    def relevance(
        self,
        *,
        query_vector: Sequence[float] | None,
        query_model: str | None,
        query_terms: Collection[str],
        lexical_weight: float,
    ) -> FloatArray:
        """Each row's relevance to the query (pipeline.ranking.relevance)."""
        return relevance(
            self.corpus,
            query_vector=query_vector,
            query_model=query_model,
            query_terms=query_terms,
            lexical_weight=lexical_weight,
        )
