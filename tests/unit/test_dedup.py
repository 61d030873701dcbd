"""Jaccard deduplication, polarity conflicts and the deduplication plan.

Every expected value here is worked out by hand in the test's comment or table.
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlane.pipeline.dedup import plan as dedup_rules
from memlane.pipeline.dedup.keywords import keywords
from memlane.pipeline.dedup.plan import (
    DedupPlan,
    PlannedBump,
    PlannedReread,
    PlannedSupersede,
    Sighting,
    accounted,
    distinct_evidence,
    jaccard,
)
from memlane.pipeline.records import ExtractedMemory, MemoryRecord, MemoryStatus
from tests.defaults import DEDUP_MIN_KEYWORDS, DEDUP_THRESHOLD

# The settings' defaults, passed as memlane's callers pass the settings.
plan = partial(dedup_rules.plan, threshold=DEDUP_THRESHOLD, min_keywords=DEDUP_MIN_KEYWORDS)
is_duplicate = partial(
    dedup_rules.is_duplicate, threshold=DEDUP_THRESHOLD, min_keywords=DEDUP_MIN_KEYWORDS
)
conflicts = partial(
    dedup_rules.conflicts, threshold=DEDUP_THRESHOLD, min_keywords=DEDUP_MIN_KEYWORDS
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
EARLIER = NOW - timedelta(days=30)


def extracted(
    content: str,
    *,
    importance: float = 0.8,
    confidence: float = 1.0,
    source_seq: int | None = None,
) -> ExtractedMemory:
    return ExtractedMemory(
        content=content,
        category="preference",
        importance=importance,
        confidence=confidence,
        source_seq=source_seq,
    )


def sighting(
    content: str,
    *,
    seq: int | None = None,
    conversation: str = "c1",
    window: tuple[int, int] = (0, 19),
    importance: float = 0.8,
    confidence: float = 1.0,
) -> Sighting:
    memory = extracted(content, importance=importance, confidence=confidence, source_seq=seq)
    return Sighting.of(
        memory, conversation_id=conversation, new_from_seq=window[0], end_seq=window[1]
    )


def record(
    memory_id: str,
    content: str,
    *,
    conversation: str | None = "c0",
    evidence_seq: int | None = None,
    status: MemoryStatus = "active",
    access_count: int = 1,
    importance: float = 0.5,
    confidence: float = 0.7,
) -> MemoryRecord:
    return MemoryRecord(
        id=memory_id,
        user_id="u1",
        content=content,
        category="preference",
        importance=importance,
        confidence=confidence,
        status=status,
        keywords=keywords(content),
        access_count=access_count,
        created_at=EARLIER,
        accessed_at=EARLIER,
        source_conversation_id=conversation,
        evidence_seq=evidence_seq,
    )


class FakeStore:
    """Applies plans the way the real store must: inserts with their access_count and
    evidence, bumps by increment, supersessions as a status change."""

    def __init__(self) -> None:
        self.memories: dict[str, MemoryRecord] = {}

    def apply(self, result: DedupPlan, *, now: datetime) -> None:
        for insert in result.inserts:
            memory_id = f"mem_{len(self.memories):04d}"
            self.memories[memory_id] = MemoryRecord(
                id=memory_id,
                user_id="u1",
                content=insert.memory.content,
                category=insert.memory.category,
                importance=insert.memory.importance,
                confidence=insert.memory.confidence,
                status=insert.status,
                keywords=insert.keywords,
                access_count=insert.access_count,
                created_at=now,
                accessed_at=now,
                source_conversation_id=insert.conversation_id,
                evidence_seq=insert.evidence_to_seq,
            )
        for bump in result.bumps:
            old = self.memories[bump.memory_id]
            self.memories[bump.memory_id] = old.model_copy(
                update={
                    "access_count": old.access_count + bump.increment,
                    "confirmed_at": bump.confirmed_at,
                    "importance": bump.importance,
                    "confidence": bump.confidence,
                    "evidence_seq": bump.evidence_seq,
                }
            )
        for supersede in result.supersedes:
            old = self.memories[supersede.memory_id]
            self.memories[supersede.memory_id] = old.model_copy(update={"status": "superseded"})

    def store(self, sightings: list[Sighting], *, now: datetime = NOW) -> DedupPlan:
        result = plan(sightings, list(self.memories.values()), now=now)
        self.apply(result, now=now)
        return result


# --------------------------------------------------------------------------- jaccard


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (set(), set(), 0.0),
        ({"a"}, set(), 0.0),
        ({"a", "b", "c"}, {"a", "b", "c"}, 1.0),
        ({"a", "b", "c", "d"}, {"a", "b", "c", "e"}, 0.6),  # 3 / 5
        ({"a", "b", "c"}, {"a"}, 1 / 3),
        ({"a", "b"}, {"c", "d"}, 0.0),
        ({"a", "b", "c", "d", "e"}, {"a", "b", "c", "d", "f", "g", "h"}, 0.5),  # 4 / 8
    ],
)
def test_jaccard(a: set[str], b: set[str], expected: float) -> None:
    # Exact: p / q rounds to the same double as the literal with that value.
    assert jaccard(frozenset(a), frozenset(b)) == expected
    assert jaccard(frozenset(b), frozenset(a)) == expected


def _words(*names: object) -> frozenset[str]:
    return frozenset(f"w{name}" for name in names)


# 2,999 shared (1001..3999) of 5,000 in all (0..4999): just under 0.60.
_JUST_UNDER = (_words(*range(4000)), _words(*range(1001, 5000)))


def test_the_just_under_pair_is_just_under() -> None:
    assert jaccard(*_JUST_UNDER) == 0.5998


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        (_words(1, 2, 3, 4), _words(1, 2, 3, 5), True),  # 3/5 = 0.60 exactly
        (_words(*range(8)), _words(*range(6), 8, 9), True),  # 6/10 = 0.60 exactly
        (*_JUST_UNDER, False),  # 2999/5000 = 0.5998
        (_words(1, 2, 3, 4, 5), _words(1, 2, 3, 6, 7), False),  # 3/7
        (_words(1, 2, 3), _words(1, 2, 3, 4), True),  # 3/4, both sides ≥ 3
        (_words(1, 2, 3), _words(1, 2), False),  # 2/3, but one side has 2
        (_words(1, 2), _words(1, 2), False),  # identical, but only 2 keywords
        (frozenset(), frozenset(), False),
    ],
)
def test_is_duplicate_by_jaccard_with_min_keywords(
    left: frozenset[str], right: frozenset[str], expected: bool
) -> None:
    # Distinct neutral texts, so only the keyword rule can decide.
    assert is_duplicate("first text", left, "second text", right) is expected
    assert is_duplicate("second text", right, "first text", left) is expected


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("User prefers TypeScript", "The user prefers TypeScript.", True),  # same keywords
        ("User prefers TypeScript", "User prefers functional patterns", False),  # 2/5
        ("User prefers TypeScript", "User does not prefer TypeScript", False),  # polarity
        ("User likes Java", "User dislikes Java", False),  # 2/4 and polarity
        (
            "User is migrating the billing service to Postgres",
            "User migrates billing service to Postgres",
            True,
        ),
        ("Likes Go", "likes   GO.", True),  # 2 keywords, same normalised text
        ("Likes Go", "Likes Go a lot", False),  # 2 keywords, different text
        ("Prefers C++", "Prefers C", False),  # same keywords {prefer, c}, different text
    ],
)
def test_is_duplicate_on_sentences(a: str, b: str, expected: bool) -> None:
    assert is_duplicate(a, keywords(a), b, keywords(b)) is expected


def test_threshold_and_min_keywords_are_parameters() -> None:
    a, b = _words(1, 2, 3, 4), _words(1, 2, 3, 5)  # 0.60
    assert is_duplicate("x", a, "y", b, threshold=0.60)
    assert not is_duplicate("x", a, "y", b, threshold=0.61)
    assert not is_duplicate("x", a, "y", b, min_keywords=5)
    two = _words(1, 2)
    assert is_duplicate("x", two, "y", two, min_keywords=2)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("User likes Java", "User dislikes Java", True),
        ("User prefers TypeScript", "User does not prefer TypeScript", True),
        ("User always writes tests", "User never writes tests", True),
        ("User uses tabs", "User never uses tabs", True),
        ("User loves Java", "User hates Java", True),
        ("User no longer uses Vim", "User uses Vim", True),
        ("User likes Java", "User likes Java", False),  # same polarity
        ("User likes Java", "User loves Java", False),  # same polarity
        ("User likes Java", "User dislikes Kotlin", False),  # topics 1/3
        ("User prefers TypeScript", "User does not prefer functional patterns", False),
        ("Likes Java", "Dislikes Java", True),  # short: equal topics {java}
        ("Likes Java", "Hates Java coffee", False),  # short: topics differ
        ("Likes it", "Hates it", False),  # no topic at all
    ],
)
def test_conflicts(a: str, b: str, expected: bool) -> None:
    assert conflicts(a, keywords(a), b, keywords(b)) is expected
    assert conflicts(b, keywords(b), a, keywords(a)) is expected


# --------------------------------------------------------------------------- sightings


def test_sighting_evidence_is_the_message_or_the_new_part_of_the_window() -> None:
    named = sighting("User prefers TypeScript", seq=7, window=(5, 9))
    assert (named.evidence_from_seq, named.evidence_to_seq) == (7, 7)
    unnamed = sighting("User prefers TypeScript", window=(5, 9))
    assert (unnamed.evidence_from_seq, unnamed.evidence_to_seq) == (5, 9)
    assert named.keywords == {"prefer", "typescript"}


def test_a_sighting_with_an_empty_evidence_range_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        Sighting(extracted("User prefers TypeScript"), frozenset(), "c1", 5, 4)


@pytest.mark.parametrize(
    ("ranges", "expected"),
    [
        ([], 0),
        ([("c1", 3, 3)], 1),
        ([("c1", 3, 3), ("c1", 3, 3)], 1),  # the same message twice
        ([("c1", 12, 12), ("c1", 10, 14)], 1),  # the message is inside the window
        ([("c1", 11, 11), ("c1", 13, 13)], 2),
        ([("c1", 0, 4), ("c1", 4, 9), ("c1", 10, 12)], 2),  # 0..9 touch at 4; 10..12 apart
        ([("c1", 3, 3), ("c2", 3, 3)], 2),  # another conversation is other evidence
    ],
)
def test_distinct_evidence(ranges: list[tuple[str, int, int]], expected: int) -> None:
    sightings = [
        Sighting(extracted("User prefers TypeScript"), frozenset(), c, start, stop)
        for c, start, stop in ranges
    ]
    assert distinct_evidence(sightings) == expected


# --------------------------------------------------------------------------- the plan


def test_empty_batch_plans_nothing() -> None:
    assert plan([], [record("mem_1", "User likes Java")], now=NOW) == DedupPlan((), (), (), ())


def test_a_new_memory_is_inserted_once() -> None:
    result = plan([sighting("User prefers TypeScript", seq=4)], [], now=NOW)
    (insert,) = result.inserts
    assert insert.sighting_index == 0
    assert insert.memory.content == "User prefers TypeScript"
    assert insert.keywords == {"prefer", "typescript"}
    assert (insert.access_count, insert.status) == (1, "active")
    assert (insert.conversation_id, insert.evidence_from_seq, insert.evidence_to_seq) == (
        "c1",
        4,
        4,
    )
    assert (result.bumps, result.rereads, result.supersedes) == ((), (), ())


def test_distinct_memories_stay_distinct() -> None:
    result = plan(
        [sighting("User prefers TypeScript"), sighting("User prefers functional patterns")],
        [],
        now=NOW,
    )
    assert [i.memory.content for i in result.inserts] == [
        "User prefers TypeScript",
        "User prefers functional patterns",
    ]


def test_duplicates_in_one_batch_collapse_counting_distinct_evidence() -> None:
    result = plan(
        [
            sighting("User prefers TypeScript", seq=2, importance=0.5, confidence=0.7),
            sighting("User prefers functional patterns", seq=3),
            sighting("The user prefers TypeScript.", seq=7, importance=0.9, confidence=0.7),
            sighting("User prefers TypeScript", seq=7, importance=0.6, confidence=1.0),
        ],
        [],
        now=NOW,
    )
    typescript, functional = result.inserts
    assert typescript.sighting_indices == (0, 2, 3)
    assert typescript.access_count == 2  # messages 2 and 7
    assert (typescript.evidence_from_seq, typescript.evidence_to_seq) == (2, 7)
    assert typescript.memory.content == "User prefers TypeScript"  # the first wording
    assert (typescript.memory.importance, typescript.memory.confidence) == (0.9, 1.0)
    assert functional.sighting_indices == (1,)


def test_thirty_sightings_with_distinct_evidence_in_one_batch_are_one_memory() -> None:
    result = plan([sighting("User prefers TypeScript", seq=n) for n in range(30)], [], now=NOW)
    (insert,) = result.inserts
    assert insert.access_count == 30


def test_a_duplicate_of_a_known_memory_bumps_it() -> None:
    known = record("mem_1", "User prefers TypeScript", conversation="c0", evidence_seq=9)
    said = NOW - timedelta(days=3)
    result = plan(
        [sighting("The user prefers TypeScript", seq=3, importance=0.9, confidence=0.7)],
        [known],
        now=NOW,
        stated_at={3: said, 4: NOW},
    )
    assert result.inserts == ()
    assert result.bumps == (
        PlannedBump(
            memory_id="mem_1",
            increment=1,
            importance=0.9,  # max(0.5, 0.9)
            confidence=0.7,  # max(0.7, 0.7)
            confirmed_at=said,  # when the confirming message was said, not processing time
            evidence_seq=9,  # evidence from c1 says nothing about seqs of c0
            sighting_indices=(0,),
        ),
    )


def test_a_confirmation_is_dated_by_its_newest_message_and_never_after_now() -> None:
    known = record("mem_1", "User prefers TypeScript", conversation="c0", evidence_seq=9)
    both = [sighting("User prefers TypeScript", seq=s) for s in (3, 6)]
    said = {3: NOW - timedelta(days=3), 6: NOW - timedelta(days=1)}
    (bump,) = plan(both, [known], now=NOW, stated_at=said).bumps
    assert bump.confirmed_at == said[6]
    (future,) = plan(both, [known], now=NOW, stated_at={6: NOW + timedelta(days=1)}).bumps
    assert future.confirmed_at == NOW


def test_a_bump_never_lowers_importance_or_confidence() -> None:
    known = record("mem_1", "User prefers TypeScript", importance=0.95, confidence=1.0)
    result = plan(
        [sighting("User prefers TypeScript", importance=0.3, confidence=0.7)], [known], now=NOW
    )
    (bump,) = result.bumps
    assert (bump.importance, bump.confidence) == (0.95, 1.0)


def test_a_known_memory_without_stored_keywords_is_still_matched() -> None:
    known = record("mem_1", "User prefers TypeScript for web apps").model_copy(
        update={"keywords": frozenset()}
    )
    result = plan([sighting("User prefers TypeScript for web apps too")], [known], now=NOW)
    assert [b.memory_id for b in result.bumps] == ["mem_1"]


@pytest.mark.parametrize(
    ("seq", "window", "bumped"),
    [
        (3, (0, 19), False),  # message 3 evidenced it already (evidence_seq 5)
        (5, (0, 19), False),  # the very message that last evidenced it
        (6, (0, 19), True),  # a later message: a new confirmation
        (None, (0, 5), False),  # the window's new part ends at 5: nothing new
        (None, (6, 9), True),  # only messages after 5
    ],
)
def test_rereading_the_same_messages_is_not_a_confirmation(
    seq: int | None, window: tuple[int, int], bumped: bool
) -> None:
    known = record("mem_1", "User prefers TypeScript", conversation="c1", evidence_seq=5)
    result = plan([sighting("User prefers TypeScript", seq=seq, window=window)], [known], now=NOW)
    assert result.inserts == ()
    if bumped:
        assert [(b.memory_id, b.increment) for b in result.bumps] == [("mem_1", 1)]
        assert result.bumps[0].evidence_seq == (window[1] if seq is None else seq)
        assert result.rereads == ()
    else:
        assert result.bumps == ()
        assert result.rereads == (PlannedReread("mem_1", (0,)),)


def test_several_sightings_of_a_known_memory_bump_it_once_by_their_new_evidence() -> None:
    known = record("mem_1", "User prefers TypeScript", conversation="c1", evidence_seq=5)
    result = plan(
        [
            sighting("User prefers TypeScript", seq=4),  # re-read
            sighting("User prefers TypeScript.", seq=8),
            sighting("The user prefers TypeScript", seq=8),  # same message again
            sighting("User prefers TypeScript", seq=11),
        ],
        [known],
        now=NOW,
    )
    (bump,) = result.bumps
    assert (bump.increment, bump.evidence_seq, bump.sighting_indices) == (2, 11, (0, 1, 2, 3))


def test_only_active_known_memories_are_matched() -> None:
    known = [
        record("mem_1", "User prefers TypeScript", status="superseded"),
        record("mem_3", "User prefers TypeScript", status="quarantined"),
    ]
    result = plan([sighting("User prefers TypeScript")], known, now=NOW)
    assert len(result.inserts) == 1
    assert (result.bumps, result.supersedes, result.forgotten) == ((), (), ())


def test_a_forgotten_memory_stays_forgotten() -> None:
    known = [
        record("mem_2", "User prefers TypeScript", status="deleted"),
        record("mem_4", "User lives in Lisbon"),
    ]
    said = [
        sighting("User prefers TypeScript"),  # forgotten: dropped
        sighting("User lives in Lisbon"),  # active: confirmed
        sighting("The user prefers TypeScript"),  # forgotten too
        sighting("User drinks green tea daily"),  # new
    ]
    result = plan(said, known, now=NOW)
    assert [(f.memory_id, f.sighting_indices) for f in result.forgotten] == [("mem_2", (0, 2))]
    assert [b.memory_id for b in result.bumps] == ["mem_4"]
    assert [i.memory.content for i in result.inserts] == ["User drinks green tea daily"]
    assert accounted(result) == [0, 1, 2, 3]
    # an active duplicate wins over a forgotten one: it is confirmed, not dropped
    both = [*known, record("mem_1", "User prefers TypeScript")]
    result = plan(said[:1], both, now=NOW)
    assert ([b.memory_id for b in result.bumps], result.forgotten) == (["mem_1"], ())


def test_the_best_of_several_known_duplicates_is_bumped() -> None:
    new = sighting("User prefers TypeScript for web apps")  # {user prefer typescript web app}
    close = record("mem_b", "User prefers TypeScript for web apps today")  # 5/6
    closest = record("mem_c", "The user prefers TypeScript for web apps")  # 5/5
    closer = record("mem_a", "User prefers TypeScript for web")  # 4/5
    result = plan([new], [close, closest, closer], now=NOW)
    assert [b.memory_id for b in result.bumps] == ["mem_c"]


def test_equally_good_known_duplicates_are_decided_by_id() -> None:
    twins = [record(i, "User prefers TypeScript") for i in ("mem_b", "mem_a", "mem_c")]
    for known in (twins, twins[::-1]):
        result = plan([sighting("User prefers TypeScript")], known, now=NOW)
        assert [b.memory_id for b in result.bumps] == ["mem_a"]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("User likes Java", "User dislikes Java"),
        ("User prefers TypeScript", "User does not prefer TypeScript"),
        ("User always writes tests", "User never writes tests"),
        ("User never writes tests", "User always writes tests"),
    ],
)
def test_opposite_polarity_supersedes_the_known_memory(old: str, new: str) -> None:
    result = plan([sighting(new)], [record("mem_1", old)], now=NOW)
    assert [i.memory.content for i in result.inserts] == [new]
    assert result.inserts[0].status == "active"
    assert result.supersedes == (PlannedSupersede("mem_1", 0),)
    assert (result.bumps, result.rereads) == ((), ())


def test_a_superseded_memory_is_not_superseded_again() -> None:
    known = record("mem_1", "User likes Java", status="superseded")
    result = plan([sighting("User dislikes Java")], [known], now=NOW)
    assert result.supersedes == ()


def test_one_new_statement_supersedes_every_memory_it_contradicts() -> None:
    known = [record("mem_2", "User likes Java"), record("mem_1", "User loves Java")]
    result = plan([sighting("User hates Java")], known, now=NOW)
    assert result.supersedes == (PlannedSupersede("mem_1", 0), PlannedSupersede("mem_2", 0))


@pytest.mark.parametrize(("hates_seq", "dislikes_seq", "newest"), [(8, 3, 0), (3, 8, 1)])
def test_the_newest_of_several_contradictions_supersedes(
    hates_seq: int, dislikes_seq: int, newest: int
) -> None:
    # "dislikes" and "hates" agree with each other; both contradict the known memory.
    result = plan(
        [
            sighting("User hates Java", seq=hates_seq),
            sighting("User dislikes Java", seq=dislikes_seq),
        ],
        [record("mem_1", "User likes Java")],
        now=NOW,
    )
    assert [i.status for i in result.inserts] == ["active", "active"]
    assert result.supersedes == (PlannedSupersede("mem_1", newest),)


@pytest.mark.parametrize(
    ("likes_seq", "dislikes_seq", "statuses"),
    [(2, 5, ("superseded", "active")), (5, 2, ("active", "superseded"))],
)
def test_in_a_batch_the_later_of_two_conflicting_statements_wins(
    likes_seq: int, dislikes_seq: int, statuses: tuple[str, str]
) -> None:
    result = plan(
        [
            sighting("User likes Java", seq=likes_seq),
            sighting("User dislikes Java", seq=dislikes_seq),
        ],
        [],
        now=NOW,
    )
    assert tuple(i.status for i in result.inserts) == statuses
    assert result.supersedes == ()


def test_a_known_memory_confirmed_after_a_contradiction_in_the_batch_stays() -> None:
    known = record("mem_1", "User likes Java")
    result = plan(
        [sighting("User dislikes Java", seq=2), sighting("User likes Java", seq=6)],
        [known],
        now=NOW,
    )
    assert [(b.memory_id, b.increment) for b in result.bumps] == [("mem_1", 1)]
    assert [(i.memory.content, i.status) for i in result.inserts] == [
        ("User dislikes Java", "superseded")
    ]
    assert result.supersedes == ()


def test_a_known_memory_contradicted_after_its_confirmation_is_superseded() -> None:
    known = record("mem_1", "User likes Java")
    result = plan(
        [sighting("User likes Java", seq=2), sighting("User dislikes Java", seq=6)],
        [known],
        now=NOW,
    )
    assert [b.memory_id for b in result.bumps] == ["mem_1"]
    assert [(i.memory.content, i.status) for i in result.inserts] == [
        ("User dislikes Java", "active")
    ]
    assert result.supersedes == (PlannedSupersede("mem_1", 0),)


def test_every_sighting_is_accounted_for_exactly_once() -> None:
    known = [
        record("mem_1", "User prefers TypeScript"),
        record("mem_2", "User likes Java"),
        record("mem_3", "User uses Vim", conversation="c1", evidence_seq=9),
    ]
    sightings = [
        sighting("User prefers TypeScript", seq=1),  # bump mem_1
        sighting("User dislikes Java", seq=2),  # insert, supersedes mem_2
        sighting("User uses Vim", seq=3),  # re-read of mem_3
        sighting("User prefers dark mode", seq=4),  # insert
        sighting("User prefers dark mode.", seq=5),  # merged into that insert
    ]
    result = plan(sightings, known, now=NOW)
    assert accounted(result) == [0, 1, 2, 3, 4]
    assert [i.sighting_indices for i in result.inserts] == [(1,), (3, 4)]
    assert [(b.memory_id, b.sighting_indices) for b in result.bumps] == [("mem_1", (0,))]
    assert result.rereads == (PlannedReread("mem_3", (2,)),)
    assert result.supersedes == (PlannedSupersede("mem_2", 0),)


def test_accounted_sees_a_lost_or_doubled_sighting() -> None:
    result = plan([sighting("User prefers TypeScript"), sighting("User likes Java")], [], now=NOW)
    first, second = result.inserts
    lost = replace(result, inserts=(first,))
    doubled = replace(result, inserts=(first, replace(second, sighting_indices=(1, 0))))
    assert accounted(result) == [0, 1]
    assert accounted(lost) == [0]
    assert accounted(doubled) == [0, 0, 1]


# --------------------------------------------------------------------------- over time


def test_thirty_confirmations_from_thirty_conversations_make_one_memory_seen_thirty_times() -> None:
    store = FakeStore()
    for n in range(30):
        store.store([sighting("User prefers TypeScript", seq=3, conversation=f"c{n}")])
    (memory,) = store.memories.values()
    assert memory.access_count == 30


def test_thirty_confirmations_from_new_messages_of_one_conversation_count_thirty() -> None:
    store = FakeStore()
    for job in range(30):
        window = (job * 5, job * 5 + 19)  # the last 20 messages, 5 of them new
        new_part = (window[1] - 4, window[1])
        store.store([sighting("User prefers TypeScript", seq=new_part[0], window=new_part)])
    (memory,) = store.memories.values()
    assert memory.access_count == 30


def test_overlapping_windows_rereading_one_message_count_it_once() -> None:
    store = FakeStore()
    for job in range(4):  # windows 0..19, 5..24, 10..29, 15..34 all contain message 17
        store.store(
            [sighting("User prefers TypeScript", seq=17, window=(15 + 5 * job, 19 + 5 * job))]
        )
    (memory,) = store.memories.values()
    assert (memory.access_count, memory.evidence_seq) == (1, 17)


def test_a_redelivered_batch_changes_nothing() -> None:
    store = FakeStore()
    batch = [sighting("User prefers TypeScript", seq=4), sighting("User likes Java", seq=6)]
    store.store(batch)
    before = dict(store.memories)
    again = store.store(batch, now=NOW + timedelta(hours=1))
    assert (again.inserts, again.bumps, again.supersedes) == ((), (), ())
    assert store.memories == before


def test_a_change_of_mind_keeps_the_old_memory_as_superseded() -> None:
    store = FakeStore()
    store.store([sighting("User likes Java", seq=2)])
    store.store([sighting("User dislikes Java", seq=30)])
    assert sorted((m.content, m.status) for m in store.memories.values()) == [
        ("User dislikes Java", "active"),
        ("User likes Java", "superseded"),
    ]


# --------------------------------------------------------------------------- properties

_SUBJECTS = ["User", "The user"]
_VERBS = ["likes", "dislikes", "prefers", "does not prefer", "always uses", "never uses", "uses"]
_OBJECTS = ["Java", "TypeScript", "tabs", "dark mode", "functional patterns"]
_TAILS = ["", " at work", " for scripts", "."]

sentences = st.builds(
    lambda s, v, o, t: f"{s} {v} {o}{t}",
    st.sampled_from(_SUBJECTS),
    st.sampled_from(_VERBS),
    st.sampled_from(_OBJECTS),
    st.sampled_from(_TAILS),
)


@st.composite
def sightings_strategy(draw: st.DrawFn) -> Sighting:
    start = draw(st.integers(0, 30))
    end = draw(st.integers(start, start + 10))
    return sighting(
        draw(sentences),
        seq=draw(st.none() | st.integers(0, 40)),
        conversation=draw(st.sampled_from(["c1", "c2"])),
        window=(start, end),
        importance=draw(st.sampled_from([0.3, 0.6, 0.9])),
        confidence=draw(st.sampled_from([0.7, 1.0])),
    )


@st.composite
def known_strategy(draw: st.DrawFn) -> list[MemoryRecord]:
    contents = draw(st.lists(sentences, max_size=8))
    return [
        record(
            f"mem_{index:02d}",
            content,
            conversation=draw(st.sampled_from(["c1", "c2", None])),
            evidence_seq=draw(st.none() | st.integers(0, 40)),
            status=draw(st.sampled_from(["active", "active", "superseded", "deleted"])),
        )
        for index, content in enumerate(contents)
    ]


@settings(max_examples=200, deadline=None)
@given(st.lists(sightings_strategy(), max_size=10), known_strategy())
def test_the_plan_accounts_for_every_sighting_and_is_consistent(
    sightings: list[Sighting], known: list[MemoryRecord]
) -> None:
    result = plan(sightings, known, now=NOW)
    assert accounted(result) == list(range(len(sightings)))
    active_ids = {k.id for k in known if k.status == "active"}
    touched = [b.memory_id for b in result.bumps] + [r.memory_id for r in result.rereads]
    assert len(touched) == len(set(touched)) and set(touched) <= active_ids
    # no message times given: a confirmation is dated `now`
    assert all(b.increment >= 1 and b.confirmed_at == NOW for b in result.bumps)
    assert all(1 <= i.access_count <= len(i.sighting_indices) for i in result.inserts)
    superseded = [s.memory_id for s in result.supersedes]
    assert len(superseded) == len(set(superseded)) and set(superseded) <= active_ids
    assert all(result.inserts[s.by_insert].status == "active" for s in result.supersedes)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(sightings_strategy(), max_size=10), known_strategy(), st.randoms(use_true_random=False)
)
def test_the_plan_does_not_depend_on_the_order_of_known_memories(
    sightings: list[Sighting], known: list[MemoryRecord], rng: random.Random
) -> None:
    shuffled = list(known)
    rng.shuffle(shuffled)
    assert plan(sightings, shuffled, now=NOW) == plan(sightings, known, now=NOW)


@given(st.frozensets(st.text(max_size=3)), st.frozensets(st.text(max_size=3)))
def test_jaccard_is_symmetric_and_in_the_unit_interval(
    a: frozenset[str], b: frozenset[str]
) -> None:
    value = jaccard(a, b)
    assert value == jaccard(b, a)
    assert 0.0 <= value <= 1.0
    assert (value == 1.0) == (a == b and bool(a))
