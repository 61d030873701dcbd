"""SQLite's one-row aggregate read of a user's memories (store/memories/columns.py) gives,
bit for bit, what the row-by-row read gives, on awkward values; and declines, leaving
the row read to serve, where a float would not come back exactly."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from memlane.config.settings import load_settings
from memlane.models.db import unit_of_work
from memlane.models.store.memories import table as memory_table
from memlane.models.store.memories.columns import MemoryColumns, sqlite_columns
from memlane.models.tables import MemoryRow
from memlane.workers.embedders import get_embedder

AWKWARD_TEXTS = [
    "plain",
    'quotes " and \' and, commas, [brackets] {"json": 1}',
    "a NUL \x00 inside, a tab \t, a newline \n, a bell \x07, DEL \x7f",
    "unicode: é, ß, 中文, 😀, \u2028 \u2029 \ufeff",
    "",
    "\\ backslashes \\\\ and \\u0041 escapes",
]
FLOATS = [0.1, 1 / 3, -1 / 3, 2 / 3, 0.7000000000000001, 1.0, 0.0, 0.001, 1.9999999999999998, 0.5]


def _bits(value: Any) -> Any:
    """A value in a form two reads compare equal in only when they are bit for bit
    equal (a float by its hex, an array by its type, shape and bytes)."""
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, str | bytes | int | bool) or value is None:
        return (type(value).__name__, value)
    return [_bits(of) for of in value]


def _same(mine: MemoryColumns, theirs: MemoryColumns) -> None:
    for name in MemoryColumns.__slots__:
        assert _bits(getattr(mine, name)) == _bits(getattr(theirs, name)), name


def _memory(
    i: int, user: str, *, importance: float, confidence: float, dim: int, model: str
) -> MemoryRow:
    now = datetime(2026, 11, 25, 12, 0, 0, 123456, tzinfo=UTC)
    shapes: list[tuple[list[float] | None, str | None]] = [
        ([((i * 7 + k) % 13) / 7 - 0.9 for k in range(dim)], model),
        (None, None),  # no vector
        ([0.25] * dim, "another-embedder"),
        ([0.5] * (dim + 1), model),  # of another dimension
        ([1 / 3] * dim, ""),  # an empty embedder name
    ]
    vector, embedder = shapes[i % len(shapes)]
    return MemoryRow(
        id=f"mem_{random.Random(i).getrandbits(64):016x}",  # ids not in insertion order
        user_id=user,
        content=f"{AWKWARD_TEXTS[i % len(AWKWARD_TEXTS)]} #{i}",
        category=["preference", "fact", 'ÿ, "odd"'][i % 3],
        importance=importance,
        confidence=confidence,
        tier=["candidate", "pinned", "core"][i % 3],
        status="active" if i % 7 else "forgotten",
        sensitive=bool(i % 2),
        expires_at=None if i % 4 else now + timedelta(days=i, microseconds=i),
        keywords=[]
        if i % 5 == 0
        else ["tea", f"w{i}", "é", 'a "quoted", word', "odd\ud800"][: i % 6],
        embedding=vector,
        embedding_model=embedder,
        access_count=i * 3,
        created_at=now - timedelta(days=i, microseconds=7 * i),
        confirmed_at=now - timedelta(hours=i),
        accessed_at=now - timedelta(minutes=i, microseconds=i),
        ref=i + 1,
        source_conversation_id=None if i % 3 else f'conv, "{i}"',
        source_job_id=None if i % 2 else f"job_{i}",
        evidence_seq=None if i % 4 == 1 else i,
    )


def _store(url: str, user: str, floats: Sequence[tuple[float, float]]) -> None:
    embedder = get_embedder(load_settings(database_url=url))
    with unit_of_work(url) as session:
        for i, (importance, confidence) in enumerate(floats):
            session.add(
                _memory(
                    i,
                    user,
                    importance=importance,
                    confidence=confidence,
                    dim=embedder.dim,
                    model=embedder.name,
                )
            )
        session.add(_memory(999, "someone-else", importance=0.5, confidence=0.5, dim=1, model="x"))


def _both(url: str, user: str) -> tuple[MemoryColumns | None, MemoryColumns]:
    embedder = get_embedder(load_settings(database_url=url))
    of = {"model": embedder.name, "dim": embedder.dim}
    with unit_of_work(url) as session:
        driver = session.connection().connection.driver_connection
        fast = sqlite_columns(driver, user, **of)
        rows = memory_table._row_columns(session, user, False, **of)
    return fast, rows


def test_the_aggregate_read_is_the_row_read_bit_for_bit(sqlite_url: str) -> None:
    # given a user's memories of every awkward shape, with floats 15 digits do not carry
    floats = [(FLOATS[i % len(FLOATS)], FLOATS[(i * 5 + 2) % len(FLOATS)]) for i in range(60)]
    _store(sqlite_url, "u1", floats)
    # when they are read in one row of aggregates and a row per memory
    fast, rows = _both(sqlite_url, "u1")
    # then the aggregate read served, and holds the same values bit for bit, in id order
    assert fast is not None
    _same(fast, rows)
    assert list(fast.ids) == sorted(fast.ids) and len(fast.ids) == 60 - 9  # 9 forgotten
    assert {value.hex() for value in fast.importance} >= {(1 / 3).hex(), (0.1).hex()}
    assert fast.with_vectors.sum() == sum(1 for i in range(60) if i % 7 and i % 5 == 0)


@pytest.mark.parametrize("odd", [1e-300, 1e-4, 5e-324, 3.5, -1e-5, 1e300])
def test_a_float_the_aggregate_cannot_carry_leaves_the_row_read_to_serve(
    sqlite_url: str, odd: float
) -> None:
    # given a memory whose importance (or confidence) x·2^62 does not carry exactly
    floats = [(0.5, 0.5), (0.1, odd), (odd, 1 / 3)]
    _store(sqlite_url, "u1", floats)
    # when the user is read
    fast, rows = _both(sqlite_url, "u1")
    with unit_of_work(sqlite_url) as session:
        embedder = get_embedder(load_settings(database_url=sqlite_url))
        read = memory_table.read_columns(session, "u1", model=embedder.name, dim=embedder.dim)
    # then the aggregate read declines and the table is the row read's, odd value and all
    assert fast is None
    _same(read, rows)
    assert odd.hex() in {value.hex() for value in [*read.importance, *read.confidence]}


def test_a_user_past_sqlites_longest_value_is_left_to_the_row_read(sqlite_url: str) -> None:
    # given a user whose vectors joined are longer than the connection allows
    _store(sqlite_url, "u1", [(0.5, 0.5)] * 20)
    embedder = get_embedder(load_settings(database_url=sqlite_url))
    of = {"model": embedder.name, "dim": embedder.dim}
    with unit_of_work(sqlite_url) as session:
        driver = session.connection().connection.driver_connection
        limit = driver.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 8 * embedder.dim)
        try:
            # when the user is read
            fast = sqlite_columns(driver, "u1", **of)
            read = memory_table.read_columns(session, "u1", **of)
        finally:
            driver.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, limit)
        rows = memory_table._row_columns(session, "u1", False, **of)
    # then the aggregate read declines, and the row read serves them whole
    assert fast is None
    _same(read, rows)
    assert int(read.with_vectors.sum()) > 2
