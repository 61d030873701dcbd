"""A user's memories column by column: what ranking needs as arrays, and each memory's
record built only when asked for. A working set loads a user this way (a user's first
assembly may wait for the load, and building a record per memory was most of it, while
an assembly reads a few hundred of them); `MemoryTable.of_records` makes one of records.

`LazyRecords` holds the records of a view's rows, each built on first use and kept.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import numpy.typing as npt

from memlane.pipeline.assembly.line_bound import runs
from memlane.pipeline.ranking.corpus import Matrix, VectorLike, stack_vectors
from memlane.pipeline.records import EpisodeRecord, MemoryRecord, Procedure

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
Vectors = tuple[str, VectorLike] | None  # (embedder, vector) of an item, or None
Record = MemoryRecord | EpisodeRecord | Procedure
# What a memory's line shows (context_format.memory_line): ref, id, importance,
# created_at, content
LineFields = tuple[int | None, str, float, datetime, str]


@dataclass(frozen=True, slots=True)
class MemoryTable:
    """Row i is memory `ids[i]`. Times are epoch seconds (`datetime.timestamp()`'s
    value); `vectors[i]` is its vector of the table's embedder where `with_vectors[i]`,
    zeros elsewhere; `record(i)` builds its record, `line_fields(i)` reads what its line
    shows without one."""

    ids: tuple[str, ...]
    keywords: Sequence[Collection[str]]
    vectors: Matrix
    with_vectors: BoolArray
    importance: FloatArray
    confidence: FloatArray
    stated: FloatArray  # confirmed_at
    created: FloatArray  # created_at
    expires: FloatArray  # expires_at, +inf when never
    confirmations: FloatArray  # access_count
    sensitive: BoolArray
    free: BoolArray  # candidate tier
    chars: FloatArray  # characters of the content
    runs: FloatArray  # run starts of the content (pipeline.assembly.line_bound)
    refs: FloatArray  # ref, NaN when none
    record: Callable[[int], MemoryRecord]
    line_fields: Callable[[int], LineFields]

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def of_records(
        cls,
        memories: Sequence[MemoryRecord],
        vectors: Sequence[Vectors],
        *,
        model: str | None,
        dim: int | None,
    ) -> MemoryTable:
        """The table of `memories`; `vectors[i]` is (embedder, vector) of memory i, or
        None: only vectors of `model` and `dim` are kept."""
        n = len(memories)
        matrix, with_vectors = stack_vectors(vectors, model=model, dim=dim)

        def column(values: Sequence[float]) -> FloatArray:
            return np.asarray(values, dtype=np.float64).reshape(n)

        def epoch(moment: datetime | None) -> float:
            return math.inf if moment is None else moment.timestamp()

        rows = list(memories)
        return cls(
            ids=tuple(m.id for m in rows),
            keywords=[m.keywords for m in rows],
            vectors=matrix,
            with_vectors=with_vectors,
            importance=column([m.importance for m in rows]),
            confidence=column([m.confidence for m in rows]),
            stated=column([epoch(m.confirmed_at) for m in rows]),
            created=column([epoch(m.created_at) for m in rows]),
            expires=column([epoch(m.expires_at) for m in rows]),
            confirmations=column([m.access_count for m in rows]),
            sensitive=np.asarray([m.sensitive for m in rows], dtype=np.bool_).reshape(n),
            free=np.asarray([m.tier == "candidate" for m in rows], dtype=np.bool_).reshape(n),
            chars=column([len(m.content) for m in rows]),
            runs=column([runs(m.content) for m in rows]),
            refs=column([math.nan if m.ref is None else m.ref for m in rows]),
            record=rows.__getitem__,
            line_fields=lambda i: _line_fields(rows[i]),
        )


def _line_fields(m: MemoryRecord) -> LineFields:
    return m.ref, m.id, m.importance, m.created_at, m.content


class LazyRecords:
    """The records of a view's rows: row i's is `make(i)`, built on first use and kept,
    unless it was given (`with_rows`). Reads from several threads may build a record
    twice; both are equal and either is kept. `line_fields(row)` reads what a row's line
    shows without building its record, where `make` would build it.

    Held in chunks of CHUNK rows: a patched copy shares every chunk it does not write
    (copying a 100k user's list on each change cost ~0.3 ms of it), and a record built
    in a shared chunk serves every view sharing it (their rows there are the same)."""

    CHUNK = 1024
    __slots__ = ("_chunks", "_fields", "_length", "_made", "_make")

    def __init__(
        self,
        built: list[Record | None],
        make: Callable[[int], Record] | None,
        made: int = 0,
        line_fields: Callable[[int], LineFields] | None = None,
    ) -> None:
        size = self.CHUNK
        self._chunks = [built[at : at + size] for at in range(0, len(built), size)]
        self._length = len(built)
        self._make = make
        self._fields = line_fields
        self._made = made  # records built or given since the view was loaded, about

    @property
    def made(self) -> int:
        """About how many records were built or given since the view was loaded (what
        they hold counts in the view's memory; a race may miss one)."""
        return self._made

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, row: int) -> Record:
        if not 0 <= row < self._length:
            raise IndexError(row)
        chunk = self._chunks[row // self.CHUNK]
        record = chunk[row % self.CHUNK]
        if record is None:
            if self._make is None:
                raise LookupError(f"row {row} has no record")
            record = chunk[row % self.CHUNK] = self._make(row)
            self._made += 1
        return record

    def line_fields(self, row: int) -> Record | LineFields:
        """Row's record if it is built or given, else what its line shows, read where
        its record would be built from (most rows an exact walk counts are never taken:
        their record would cost more than their line and its count)."""
        if not 0 <= row < self._length:
            raise IndexError(row)
        record = self._chunks[row // self.CHUNK][row % self.CHUNK]
        if record is None and self._fields is not None:
            return self._fields(row)
        return self[row]

    def __iter__(self) -> Iterator[Record]:
        return (self[row] for row in range(self._length))

    def with_rows(self, rows: Mapping[int, Record], length: int) -> LazyRecords:
        """A copy `length` rows long with `rows` written over (or appended); this one is
        left as it was (a caller may still be ranking with it): the chunks written are
        copied, the others shared."""
        size = self.CHUNK
        copy = type(self)([], self._make, self._made + len(rows), self._fields)
        chunks = list(self._chunks)
        own: set[int] = set()  # chunks of the copy's own
        if length > self._length:
            if chunks and len(chunks[-1]) < size:
                own.add(len(chunks) - 1)
                chunks[-1] = chunks[-1] + [None] * min(
                    size - len(chunks[-1]), length - self._length
                )
            while len(chunks) * size < length:
                own.add(len(chunks))
                chunks.append([None] * min(size, length - len(chunks) * size))
        for row, record in rows.items():
            at = row // size
            if at not in own:
                chunks[at] = list(chunks[at])
                own.add(at)
            chunks[at][row % size] = record
        copy._chunks = chunks
        copy._length = length
        return copy
