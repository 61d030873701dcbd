"""The dedup lookup on both backends: the SQL finds what the prefix filter's simulation
finds, and returns what the plan reads of them (tests/unit/test_prefix_filter.py proves
the simulation exact), and the keyword frequencies stay equal to the index's postings
through inserts, plans, purges and an erased user."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from memlane.models.db import unit_of_work
from memlane.models.schemas import MemoryCreate
from memlane.models.store.memories import edits as memory_changes
from memlane.models.store.memories import memories
from memlane.models.store.reads import dedup as dedup_reads
from memlane.models.store.users import erase as users
from memlane.models.tables import MemoryKeyword, MemoryKeywordCount
from memlane.pipeline.dedup import plan as dedup
from memlane.pipeline.dedup.keywords import keywords
from memlane.pipeline.records import ExtractedMemory, MemoryRecord
from tests.defaults import DEDUP_MIN_KEYWORDS, DEDUP_THRESHOLD
from tests.unit.test_prefix_filter import exhaustive, found_by_lookup, needed_by_plan

_WORDS = ["java", "java", "project", "team", *(f"w{i}" for i in range(25))]
_VERBS = ["likes", "dislikes", "prefers", "never uses", "uses", "does not use"]


def text(rng: random.Random) -> str:
    words = rng.choices(_WORDS, k=rng.randint(0, 8))
    return f"User {rng.choice(_VERBS)} {' '.join(words)}.".replace(" .", ".")


def counted(url: str, user: str) -> tuple[dict[str, int], dict[str, int]]:
    """(the counts table, the postings counted) for the user; under "" the memories."""
    with unit_of_work(url) as s:
        table = dict(
            s.execute(
                select(MemoryKeywordCount.keyword, MemoryKeywordCount.memories).where(
                    MemoryKeywordCount.user_id == user
                )
            ).all()
        )
        rows = s.execute(
            select(MemoryKeyword.memory_id, MemoryKeyword.keyword).where(
                MemoryKeyword.user_id == user
            )
        ).all()
    postings = Counter(keyword for _, keyword in rows)
    if rows:
        postings[""] = len({memory_id for memory_id, _ in rows})
    return table, dict(postings)


def stored(url: str, user: str) -> list[MemoryRecord]:
    with unit_of_work(url) as s:
        rows = memories.list_for_user(s, user, status=None, limit=10_000)
        return [
            MemoryRecord.model_validate(
                # a record carries no language: its keywords say it
                {**row.model_dump(exclude={"language"}), "keywords": keywords(row.content)},
                from_attributes=False,
            )
            for row in rows
        ]


def add(session: Session, user: str, content: str, now: datetime) -> str:
    """Store a memory by hand (its keywords indexed and counted); its id."""
    return memories.add(
        session,
        user_id=user,
        memory=MemoryCreate(content=content),
        keywords=keywords(content),
        embedding=None,
        embedding_model="test",
        now=now,
    ).id


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_sql_lookup_finds_what_the_prefix_filter_finds(
    db_url: str, now: datetime, seed: int
) -> None:
    rng = random.Random(seed)
    with unit_of_work(db_url) as s:
        for _ in range(60):
            added = add(s, "u1", text(rng), now)
            if rng.random() < 0.3:
                memory_changes.set_status(s, "u1", added, rng.choice(["deleted", "superseded"]))
        # another user's identical memories are never found
        for _ in range(10):
            add(s, "u2", text(rng), now)
    store = stored(db_url, "u1")
    frequency = Counter(word for m in store for word in m.keywords)
    for _ in range(15):
        new = [text(rng) for _ in range(rng.randint(1, 4))]
        sets = [keywords(t) for t in new]
        with unit_of_work(db_url) as s:
            found = dedup_reads.found(s, "u1", sets, threshold=DEDUP_THRESHOLD)
            read = dedup_reads.candidates(
                s,
                "u1",
                list(zip(new, sets, strict=True)),
                threshold=DEDUP_THRESHOLD,
                min_keywords=DEDUP_MIN_KEYWORDS,
            )
        expected = found_by_lookup(
            sets, store, dict(frequency), total=sum(bool(m.keywords) for m in store)
        )
        assert sorted(m.id for m in found) == sorted(m.id for m in expected)
        assert exhaustive(new, store) <= {m.id for m in found}
        by_id = {m.id: m for m in store}
        assert {(m.id, m.status, m.keywords, m.content) for m in found} == {
            (m.id, by_id[m.id].status, by_id[m.id].keywords, by_id[m.id].content) for m in found
        }
        assert read == [  # the whole records of what the plan reads
            m.model_copy(update={"embedding": None}) for m in needed_by_plan(new, expected)
        ]
        assert all(m.user_id == "u1" for m in read)


def test_the_frequencies_follow_the_index(db_url: str, now: datetime) -> None:
    rng = random.Random(7)
    with unit_of_work(db_url) as s:
        ids = [add(s, "u1", text(rng), now) for _ in range(20)]
    sightings = [
        dedup.Sighting.of(
            ExtractedMemory(content=text(rng), category="fact", importance=0.5, confidence=1.0),
            conversation_id="c1",
            new_from_seq=0,
            end_seq=3,
        )
        for _ in range(6)
    ]
    with unit_of_work(db_url) as s:
        known = dedup_reads.candidates(
            s,
            "u1",
            [(x.memory.content, x.keywords) for x in sightings],
            threshold=DEDUP_THRESHOLD,
            min_keywords=DEDUP_MIN_KEYWORDS,
        )
        memories.apply_plan(
            s,
            dedup.plan(
                sightings,
                known,
                now=now,
                threshold=DEDUP_THRESHOLD,
                min_keywords=DEDUP_MIN_KEYWORDS,
            ),
            user_id="u1",
            job_id="job_1",
            conversation_id="c1",
            vectors=[],
            embedding_model="test",
            now=now,
        )
    table, postings = counted(db_url, "u1")
    assert table == postings and sum(table.values()) > 0
    with unit_of_work(db_url) as s:
        for memory_id in ids[:12]:
            memory_changes.purge(s, "u1", memory_id)
    table, postings = counted(db_url, "u1")
    assert table == postings
    with unit_of_work(db_url) as s:
        users.erase(s, "u1", now=datetime.now(UTC))
    assert counted(db_url, "u1") == ({}, {})


def test_words_sharing_one_posting_still_find_every_match(db_url: str, now: datetime) -> None:
    # Two keywords of 101 characters share their first 100, the index's one posting:
    # it counts once where the probe needs both.
    long = "q" * 100
    contents = [
        f"User likes {long}b and {long}d with java",  # the same keywords as the new one
        f"User likes {long}b and {long}d with java and rust",  # Jaccard 4/5
        f"User likes {long}b with rust and go",  # 2 of 6 shared: not similar
        *(f"User likes java and rust in project {i}" for i in range(4)),  # the long are rarest
    ]
    with unit_of_work(db_url) as s:
        ids = [add(s, "u1", content, now) for content in contents]
    new = keywords(contents[0])
    with unit_of_work(db_url) as s:
        found = dedup_reads.found(s, "u1", [new], threshold=DEDUP_THRESHOLD)
    assert sorted(m.id for m in found) == sorted(ids[:2])


def test_only_the_best_duplicate_or_every_contradiction_is_read(db_url: str, now: datetime) -> None:
    # a short statement that 30 longer stored ones repeat (5 of their 6 keywords)
    base = "User wants short answers with code first"
    with unit_of_work(db_url) as s:
        ids = [add(s, "u1", f"{base} on topic{i}", now) for i in range(30)]
    rules = {"threshold": DEDUP_THRESHOLD, "min_keywords": DEDUP_MIN_KEYWORDS}
    negated = "User never wants short answers with code first"
    with unit_of_work(db_url) as s:
        assert len(dedup_reads.found(s, "u1", [keywords(base)], threshold=DEDUP_THRESHOLD)) == 30
        best = dedup_reads.candidates(s, "u1", [(base, keywords(base))], **rules)
        contradicted = dedup_reads.candidates(s, "u1", [(negated, keywords(negated))], **rules)
    assert [m.id for m in best] == [min(ids)]  # Jaccard 5/6 for all: the lowest id
    assert [m.id for m in contradicted] == sorted(ids)  # each one superseded by it
