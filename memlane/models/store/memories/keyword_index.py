"""The inverted keyword index of memories (`memory_keywords`) and the per-user keyword
frequencies kept beside it (`memory_keyword_counts`), written together: a count is how
many postings of that user and keyword the index holds, whatever the memory's status,
and the count of the empty keyword how many memories it indexes. Each posting carries its
memory's keyword and topic set sizes, for the dedup lookup's length filter."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import cast

from sqlalchemy import Table, delete, update
from sqlalchemy.dialects import sqlite
from sqlalchemy.orm import Session

from memlane.models.tables import MemoryKeyword, MemoryKeywordCount
from memlane.pipeline.dedup.keywords import topic_keywords

MAX_KEYWORD = 100  # the column's length: longer keywords are indexed by their first 100
# The count under the empty keyword (no token is empty) is how many memories the index
# holds: the prefix filter's estimates need the store's size, and counting rows would not
# be cheap.
TOTAL = ""
_POSTINGS = cast(Table, MemoryKeyword.__table__)
_COUNTS = cast(Table, MemoryKeywordCount.__table__)


def posting(word: str) -> str:
    return word[:MAX_KEYWORD]


def index(session: Session, user_id: str, memories: Mapping[str, Iterable[str]]) -> None:
    """Index new memories (id → keywords) and count their keywords: one statement on
    PostgreSQL, two on SQLite."""
    postings = [
        (memory_id, word, len(kept), len(topic_keywords(kept)))
        for memory_id, words in memories.items()
        for kept in (frozenset(words),)
        for word in sorted({posting(w) for w in kept})
    ]
    if not postings:
        return
    counts = Counter(row[1] for row in postings)
    counts[TOTAL] = len({row[0] for row in postings})
    # Sorted, so two writers of one user (the facade's hand-made memories take no user
    # lock) lock the count rows in the same order.
    counted = sorted(counts.items())
    session.flush()  # the memories' rows first (an ORM statement would have flushed them)
    connection = session.connection()
    if connection.dialect.name == "postgresql":
        # The store stage runs this on every job: as one statement of fixed text with
        # array parameters (psycopg prepares it) it cost a fraction of the two
        # executemany statements through the ORM's bulk insert, one row each.
        memory_ids, keywords, keyword_counts, topic_counts = map(list, zip(*postings, strict=True))
        words, numbers = map(list, zip(*counted, strict=True))
        connection.exec_driver_sql(
            _PG_INDEX,
            {
                "user_id": user_id,
                "memory_ids": memory_ids,
                "keywords": keywords,
                "keyword_counts": keyword_counts,
                "topic_counts": topic_counts,
                "words": words,
                "counts": numbers,
            },
        )
        return
    # One statement of fixed shape per table run for many rows (executemany): a VALUES
    # list of varying length would be compiled anew for every memory stored.
    connection.execute(
        _POSTINGS.insert(),
        [
            {
                "memory_id": memory_id,
                "keyword": word,
                "user_id": user_id,
                "keyword_count": keyword_count,
                "topic_count": topic_count,
            }
            for memory_id, word, keyword_count, topic_count in postings
        ],
    )
    upsert = sqlite.insert(_COUNTS)
    connection.execute(
        upsert.on_conflict_do_update(
            index_elements=[_COUNTS.c.user_id, _COUNTS.c.keyword],
            set_={"memories": _COUNTS.c.memories + upsert.excluded.memories},
        ),
        [{"user_id": user_id, "keyword": w, "memories": n} for w, n in counted],
    )


# The postings and the counts in one statement (a data-modifying WITH runs whether or
# not the outer statement reads it); the counts in the order given.
_PG_INDEX = """\
WITH postings AS (
  INSERT INTO memory_keywords (memory_id, keyword, user_id, keyword_count, topic_count)
  SELECT p.memory_id, p.keyword, %(user_id)s, p.keyword_count, p.topic_count
  FROM unnest(%(memory_ids)s::text[], %(keywords)s::text[],
              %(keyword_counts)s::int[], %(topic_counts)s::int[])
    AS p(memory_id, keyword, keyword_count, topic_count)
)
INSERT INTO memory_keyword_counts (user_id, keyword, memories)
SELECT %(user_id)s, c.keyword, c.memories
FROM unnest(%(words)s::text[], %(counts)s::int[]) WITH ORDINALITY AS c(keyword, memories, n)
ORDER BY c.n
ON CONFLICT (user_id, keyword)
  DO UPDATE SET memories = memory_keyword_counts.memories + excluded.memories"""


def unindex(session: Session, user_id: str, memory_id: str) -> None:
    """Remove a memory's postings and uncount its keywords (a count reaching 0 goes)."""
    words = sorted(
        session.scalars(
            delete(MemoryKeyword)
            .where(MemoryKeyword.memory_id == memory_id)
            .returning(MemoryKeyword.keyword)
        )
    )
    if not words:
        return
    words.append(TOTAL)
    mine = (MemoryKeywordCount.user_id == user_id, MemoryKeywordCount.keyword.in_(words))
    session.execute(
        update(MemoryKeywordCount).where(*mine).values(memories=MemoryKeywordCount.memories - 1)
    )
    session.execute(delete(MemoryKeywordCount).where(*mine, MemoryKeywordCount.memories <= 0))
