"""The working set's column-wise read of a user's memories (store/memories/table.py) holds
what the row-by-row read holds: the same records, and the columns `MemoryTable` makes of
those records, value for value, on both backends."""

from __future__ import annotations

import gc
from datetime import UTC, datetime, timedelta

import numpy as np
from sqlalchemy import select, update

from memlane.config.settings import load_settings
from memlane.models.db import unit_of_work
from memlane.models.store.memories import table as memory_table
from memlane.models.store.rows import memory_columns, memory_of
from memlane.models.tables import MemoryRow
from memlane.pipeline.ranking.memory_table import MemoryTable
from memlane.service.facade import Memlane
from memlane.workers.embedders import get_embedder

ARRAYS = (
    "vectors",
    "with_vectors",
    "importance",
    "confidence",
    "stated",
    "created",
    "expires",
    "confirmations",
    "sensitive",
    "free",
    "chars",
    "runs",
    "refs",
)


def test_the_column_read_holds_what_the_row_read_holds(db_url: str) -> None:
    # given memories of every shape the columns must carry
    settings = load_settings(database_url=db_url)
    embedder = get_embedder(settings)
    expires = datetime(2031, 5, 7, 8, 9, 10, 123456, tzinfo=UTC)
    with Memlane(settings) as lane:
        added = [
            lane.add_memory("u1", {"content": "Drinks green tea every morning."}),
            lane.add_memory("u1", {"content": "Lives in Lyon.", "importance": 0.35}),
            lane.add_memory(
                "u1", {"content": "Allergic to nuts.", "sensitive": True, "confidence": 0.7}
            ),
            lane.add_memory("u1", {"content": "Trial ends soon.", "expires_at": expires}),
            lane.add_memory("u1", {"content": "Prefers short answers.", "tier": "pinned"}),
            lane.add_memory("u1", {"content": "Works on the billing service."}),
            lane.add_memory("u1", {"content": "Uses a standing desk."}),
        ]
        lane.add_memory("u2", {"content": "Someone else's memory."})
        lane.forget("u1", added[1].id)
    with unit_of_work(db_url) as session:
        # a vector of another embedder, and none at all
        session.execute(
            update(MemoryRow).where(MemoryRow.id == added[5].id).values(embedding_model="other")
        )
        session.execute(
            update(MemoryRow)
            .where(MemoryRow.id == added[6].id)
            .values(embedding=None, embedding_model=None)
        )
        if not db_url.startswith("postgresql"):  # jsonb refuses it
            # a keyword JSON holds only escaped: orjson refuses it, json reads it
            session.execute(
                update(MemoryRow)
                .where(MemoryRow.id == added[2].id)
                .values(keywords=["nut", "odd\ud800"])
            )
    # when the user's memories are read both ways
    with unit_of_work(db_url) as session:
        postgres = db_url.startswith("postgresql")
        rows = session.execute(
            select(*memory_columns(postgres))
            .where(MemoryRow.user_id == "u1", MemoryRow.status == "active")
            .order_by(MemoryRow.id)
        ).all()
        table, models = memory_table.read(session, "u1", model=embedder.name, dim=embedder.dim)
    records, vectors = [], []
    for row in rows:
        record, _, pair = memory_of(row, postgres)
        records.append(record)
        vectors.append(pair)
    # then they hold the same memories, records and columns
    assert table.ids == tuple(sorted(m.id for m in added if m.id != added[1].id))
    assert [table.record(i) for i in range(len(table))] == records
    # what a line shows is read without a record, as the record holds it
    assert [table.line_fields(i) for i in range(len(table))] == [
        (m.ref, m.id, m.importance, m.created_at, m.content) for m in records
    ]
    assert all(
        moment.tzinfo is UTC
        for i in range(len(table))
        for moment in (table.record(i).created_at, table.record(i).confirmed_at)
    )
    assert table.record(table.ids.index(added[3].id)).expires_at == expires
    assert models == [None if pair is None else pair[0] for pair in vectors]
    expected = MemoryTable.of_records(records, vectors, model=embedder.name, dim=embedder.dim)
    for name in ARRAYS:
        mine, theirs = getattr(table, name), getattr(expected, name)
        assert mine.dtype == theirs.dtype and np.array_equal(mine, theirs), name
    assert table.with_vectors.sum() == len(table) - 2
    assert [frozenset(words) for words in table.keywords] == [m.keywords for m in records]
    if not postgres:
        assert "odd\ud800" in table.keywords[table.ids.index(added[2].id)]
    # a row's keywords are a container the garbage collector stops walking
    gc.collect()
    assert not any(gc.is_tracked(words) for words in table.keywords)
    assert np.isinf(table.expires).sum() == len(table) - 1
    assert table.expires[table.ids.index(added[3].id)] == expires.timestamp()
    assert (table.created <= datetime.now(UTC).timestamp()).all()
    assert (table.created > (datetime.now(UTC) - timedelta(hours=1)).timestamp()).all()
