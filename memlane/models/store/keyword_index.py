"""The inverted keyword index of memories (`memory_keywords`) and the per-user keyword
frequencies kept beside it (`memory_keyword_counts`), written together: a count is how
many postings of that user and keyword the index holds, whatever the memory's status,
and the count of the empty keyword how many memories it indexes. Each posting carries its
memory's keyword and topic set sizes, for the dedup lookup's length filter."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from sqlalchemy import delete, insert, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from memlane.models.tables import MemoryKeyword, MemoryKeywordCount
from memlane.pipeline.keywords import topic_keywords

MAX_KEYWORD = 100  # the column's length: longer keywords are indexed by their first 100
# The count under the empty keyword (no token is empty) is how many memories the index
# holds: the prefix filter's estimates need the store's size, and counting rows would not
# be cheap.
TOTAL = ""


def posting(word: str) -> str:
    return word[:MAX_KEYWORD]


def index(session: Session, user_id: str, memories: Mapping[str, Iterable[str]]) -> None:
    """Index new memories (id → keywords) and count their keywords, in two statements."""
    postings = [
        {
            "memory_id": memory_id,
            "keyword": word,
            "user_id": user_id,
            "keyword_count": len(kept),
            "topic_count": len(topic_keywords(kept)),
        }
        for memory_id, words in memories.items()
        for kept in (frozenset(words),)
        for word in sorted({posting(w) for w in kept})
    ]
    if not postings:
        return
    session.execute(insert(MemoryKeyword), postings)
    counts = Counter(row["keyword"] for row in postings)
    counts[TOTAL] = len({row["memory_id"] for row in postings})
    dialect = session.get_bind().dialect.name
    upsert = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(MemoryKeywordCount)
    # One statement of fixed shape run for many rows (executemany): a VALUES list of
    # varying length would be compiled anew for every memory stored. Sorted, so two
    # writers of one user (the facade's hand-made memories take no user lock) lock the
    # count rows in the same order.
    session.execute(
        upsert.on_conflict_do_update(
            index_elements=[MemoryKeywordCount.user_id, MemoryKeywordCount.keyword],
            set_={"memories": MemoryKeywordCount.memories + upsert.excluded.memories},
        ),
        [{"user_id": user_id, "keyword": w, "memories": n} for w, n in sorted(counts.items())],
    )


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
