"""A user's active memories column by column (`MemoryColumns`), and SQLite's fast way to
read them: one row of aggregates instead of a row per memory (store/memories/table.py
builds the working set's table from either, and reads row by row where this read
declines).

Why: the sqlite3 module takes SQLite's mutex for every column value it copies (serialized
mode) and hands the GIL back and forth for every row; for a 10k user that was ~30 ms of a
~120 ms cold first assembly, against ~19 ms for the same values in one row of aggregates
(bench/README.md). Each aggregate carries its values exactly as the row read returns them:
- text, integers and NULLs through `json_group_array` (a JSON string or integer decodes
  to the same `str` or `int`; NUL and control characters are escaped, not cut);
- the keywords' JSON texts as strings, joined and parsed as the row read parses them
  (`parse_keywords`);
- the vectors of the embedder asked for as their bytes concatenated (`group_concat` of
  blobs, cast back to a blob), with which rows have one;
- importance and confidence as the integer x·2^62: SQLite prints a REAL with 15
  significant digits, too few to carry every double, while x·2^62 is exact and an
  integer for every double in [2^-10, 2) and for 0 (a power of two only moves the
  exponent). Python's `m / 2**62` is then x again (the integer's correctly rounded
  conversion, divided by a power of two). The same statement counts the rows where the
  integer does not give x back (SQLite compares in doubles as Python converts); if any,
  the read declines (None) and the caller reads row by row, which is exact for any value.

The aggregates iterate the rows once, in one order, so row i of every column is the same
memory; the rows are then put in id order here (Python's order of strings), as the row
read sorts them.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

_SCALE = 2.0**62
# a vector counts when it is of the embedder asked for and of its dimension
_USABLE = "embedding_model = :model AND typeof(embedding) = 'blob' AND length(embedding) = :size"
_EXACT = f"CAST({{x}} * {_SCALE!r} AS INTEGER) / {_SCALE!r} IS {{x}}"
_COLUMNS = [
    "json_group_array(id)",
    "json_group_array(content)",
    "json_group_array(category)",
    f"json_group_array(CAST(importance * {_SCALE!r} AS INTEGER))",
    f"json_group_array(CAST(confidence * {_SCALE!r} AS INTEGER))",
    "json_group_array(tier)",
    "json_group_array(sensitive)",
    "json_group_array(expires_at)",
    "json_group_array(coalesce(nullif(CAST(keywords AS TEXT), ''), '[]'))",
    "json_group_array(access_count)",
    "json_group_array(created_at)",
    "json_group_array(confirmed_at)",
    "json_group_array(accessed_at)",
    "json_group_array(ref)",
    "json_group_array(source_conversation_id)",
    "json_group_array(source_job_id)",
    "json_group_array(evidence_seq)",
    "json_group_array(agent_id)",
    # the embedder of a stored vector (None: no vector), as the row read reports it
    "json_group_array(CASE WHEN embedding IS NOT NULL AND embedding_model <> ''"
    " THEN embedding_model END)",
    f"json_group_array(coalesce({_USABLE}, 0))",
    f"CAST(group_concat(CASE WHEN {_USABLE} THEN embedding END, x'') AS BLOB)",
    "count(*)",
    f"sum(NOT ({_EXACT.format(x='importance')} AND {_EXACT.format(x='confidence')}))",
]
# An agent's read sees the shared memories and its own; with none (NULL), the shared only.
_SQL = (
    f"SELECT {', '.join(_COLUMNS)} FROM memories WHERE user_id = :user_id AND status = 'active'"
    " AND (agent_id IS NULL OR agent_id = :agent_id)"
)


@dataclass(frozen=True, slots=True)
class MemoryColumns:
    """A user's active memories in id order, column by column: the values a record is
    built from (as the database returns them: times as SQLite's text or PostgreSQL's
    epoch microseconds), the rows' keyword lists, the vectors of one embedder (zeros
    where `with_vectors` is False) and the embedder of each stored vector (None: none)."""

    ids: Sequence[str]
    contents: Sequence[str]
    categories: Sequence[str]
    importance: Sequence[float]
    confidence: Sequence[float]
    tiers: Sequence[str]
    sensitive: Sequence[Any]
    expires_at: Sequence[Any]
    keywords: Sequence[Sequence[str]]
    access_counts: Sequence[int]
    created_at: Sequence[Any]
    confirmed_at: Sequence[Any]
    accessed_at: Sequence[Any]
    refs: Sequence[int]
    conversations: Sequence[str | None]
    jobs: Sequence[str | None]
    evidence: Sequence[int | None]
    agents: Sequence[str | None]
    stored: Sequence[str | None]
    vectors: npt.NDArray[np.float32]
    with_vectors: npt.NDArray[np.bool_]


def parse_keywords(joined: str) -> list[list[str]]:
    """The rows' keyword lists from one JSON array of them: orjson's parse (~a third
    faster than json's at 10k), json's for what orjson refuses (a lone surrogate's
    escape, which json reads)."""
    try:
        parsed: list[list[str]] = orjson.loads(joined)
    except orjson.JSONDecodeError:
        parsed = json.loads(joined)
    return parsed


def sqlite_columns(
    driver: Any, user_id: str, *, model: str, dim: int, agent_id: str | None = None
) -> MemoryColumns | None:
    """The user's active memories `agent_id` sees (pipeline.scope) read on a sqlite3
    connection in one row of aggregates; None when there are none, a float would not come
    back exactly (module docstring) or an aggregate would be longer than SQLite allows:
    the row read serves those."""
    given = {"model": model, "size": 4 * dim, "user_id": user_id, "agent_id": agent_id}
    cursor = driver.cursor()
    try:
        row = cursor.execute(_SQL, given).fetchone()
    except sqlite3.DataError:
        # an aggregate past SQLite's longest string or blob (SQLITE_LIMIT_LENGTH, 1 GB
        # by default: ~650k memories with 384-dimension vectors); its rows, one at a
        # time, are not
        return None
    finally:
        cursor.close()
    *texts, usable, joined, count, inexact = row
    if not count or inexact:
        return None
    (
        ids,
        contents,
        categories,
        importance,
        confidence,
        tiers,
        sensitive,
        expires_at,
        keyword_texts,
        access_counts,
        created_at,
        confirmed_at,
        accessed_at,
        refs,
        conversations,
        jobs,
        evidence,
        agents,
        stored,
    ) = map(orjson.loads, texts)
    mask = np.array(orjson.loads(usable), dtype=np.bool_)
    scaled = np.array([importance, confidence], dtype=np.int64).astype(np.float64) / _SCALE
    n = len(ids)
    sort = sorted(range(n), key=ids.__getitem__)
    if sort == list(range(n)) or n < 2:
        pick: Any = None
        take: Any = tuple
    else:
        pick = np.array(sort)
        take = itemgetter(*sort)
    block = np.frombuffer(joined or b"", dtype=np.float32).reshape(-1, dim) if dim else None
    if block is not None and mask.all():
        # one copy, native, writable and in numpy's memory (store/memories/table.py)
        vectors = block.copy() if pick is None else block[pick]
    else:
        vectors = np.zeros((n, dim), dtype=np.float32)
        if block is not None and mask.any():
            vectors[mask] = block
        vectors = vectors if pick is None else vectors[pick]
    mask = mask if pick is None else mask[pick]
    scaled = scaled if pick is None else scaled[:, pick]
    return MemoryColumns(
        ids=take(ids),
        contents=take(contents),
        categories=take(categories),
        importance=scaled[0].tolist(),
        confidence=scaled[1].tolist(),
        tiers=take(tiers),
        sensitive=take(sensitive),
        expires_at=take(expires_at),
        # parsed in id order: a user's postings are built in that order, from these
        # lists' strings, and reading them in the order they were made (in memory) took
        # half the time (random ids, 10k: ~14 ms less)
        keywords=parse_keywords(f"[{','.join(take(keyword_texts))}]"),
        access_counts=take(access_counts),
        created_at=take(created_at),
        confirmed_at=take(confirmed_at),
        accessed_at=take(accessed_at),
        refs=take(refs),
        conversations=take(conversations),
        jobs=take(jobs),
        evidence=take(evidence),
        agents=take(agents),
        stored=take(stored),
        vectors=vectors,
        with_vectors=mask,
    )
