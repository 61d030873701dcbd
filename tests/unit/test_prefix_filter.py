"""The prefix filter finds every stored memory the dedup rules need, on any store.

The lookup is simulated here exactly as the store runs it (tests/integration/
test_dedup_lookup.py checks the SQL against the same simulation): the probes' postings,
the memories found `at_least` times, then `Matcher` (which answers as `could_match`,
tested below). The exhaustive answer compares every stored memory with every new one by
the rules themselves (pipeline/dedup/similarity.py).
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from memlane.pipeline.dedup.keywords import POLARITY_STEMS, keywords, topic_keywords
from memlane.pipeline.dedup.needs import Found, needed
from memlane.pipeline.dedup.plan import Sighting, duplicate_of, plan
from memlane.pipeline.dedup.prefix_filter import (
    Matcher,
    _largest,
    _least_overlap,
    could_match,
    length_fits,
    matches,
    probe,
    probes,
    required_overlap,
)
from memlane.pipeline.dedup.similarity import (
    Statement,
    jaccard,
    statements_conflict,
    statements_duplicate,
)
from memlane.pipeline.records import ExtractedMemory, MemoryRecord, MemoryStatus
from tests.defaults import DEDUP_MIN_KEYWORDS, DEDUP_THRESHOLD

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
T, M = DEDUP_THRESHOLD, DEDUP_MIN_KEYWORDS


def found_by_lookup(
    new: list[frozenset[str]],
    store: list[MemoryRecord],
    frequency: dict[str, int],
    *,
    total: int = 0,
) -> list[MemoryRecord]:
    made = probes([s for s in new if s], frequency, threshold=T, total=total)
    may_match = Matcher(new, threshold=T)
    return [
        m
        for m in store
        if m.status in ("active", "deleted")
        and any(matches(p, m.keywords) for p in made)
        and may_match(m.keywords)
    ]


def needed_by_plan(new: list[str], found: list[MemoryRecord]) -> list[MemoryRecord]:
    """What the store returns of the memories the lookup found: those the plan reads."""
    kept = needed(
        [(text, keywords(text)) for text in new],
        # in no id order, as the index returns them: ties must go by id all the same
        [Found(m.id, m.status, m.keywords, m.content) for m in reversed(found)],
        threshold=T,
        min_keywords=M,
    )
    return sorted((m for m in found if m.id in kept), key=lambda m: m.id)


def exhaustive(new: list[str], store: list[MemoryRecord]) -> set[str]:
    mine = [Statement.of(text, keywords(text)) for text in new]
    found = set()
    for m in store:
        if m.status not in ("active", "deleted"):
            continue
        theirs = Statement.of(m.content, m.keywords)
        if any(
            statements_duplicate(x, theirs, threshold=T, min_keywords=M)
            or statements_conflict(x, theirs, threshold=T, min_keywords=M)
            for x in mine
        ):
            found.add(m.id)
    return found


def record(index: int, content: str, status: MemoryStatus) -> MemoryRecord:
    return MemoryRecord(
        id=f"mem_{index:04d}",
        user_id="u1",
        content=content,
        category="fact",
        importance=0.5,
        confidence=0.7,
        status=status,
        keywords=keywords(content),
        access_count=1,
        created_at=NOW,
        accessed_at=NOW,
        source_conversation_id="c0",
    )


def sighting(content: str) -> Sighting:
    memory = ExtractedMemory(content=content, category="fact", importance=0.8, confidence=1.0)
    return Sighting.of(memory, conversation_id="c1", new_from_seq=0, end_seq=9)


# Adversarial vocabulary: the subject word in every statement, one word ("java") in most,
# polarity words that are no topic, and a long tail; drawn with skewed weights.
_COMMON = ["java", "java", "java", "project", "project", "team"]
_TAIL = [f"w{i}" for i in range(30)]
# Keywords as stored, polarity stems among them (the matcher's topic side).
_KEYWORDS = ["java", "project", "team", "like", "dislik", "prefer", "alway", *_TAIL[:8]]
_POLAR = ["likes", "dislikes", "prefers", "always uses", "never uses", "does not use", "uses"]


@st.composite
def statement(draw: st.DrawFn) -> str:
    subject = draw(st.sampled_from(["User", "The user", "User's team"]))
    verb = draw(st.sampled_from(_POLAR))
    words = draw(
        st.lists(
            st.sampled_from(_COMMON) | st.sampled_from(_TAIL[:5]) | st.sampled_from(_TAIL),
            min_size=0,
            max_size=9,
        )
    )
    return f"{subject} {verb} {' '.join(words)}.".replace(" .", ".")


@st.composite
def store_strategy(draw: st.DrawFn) -> list[MemoryRecord]:
    texts = draw(st.lists(statement(), max_size=40))
    statuses: list[MemoryStatus] = ["active", "active", "active", "deleted", "superseded"]
    return [record(i, text, draw(st.sampled_from(statuses))) for i, text in enumerate(texts)]


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.frozensets(st.sampled_from(_KEYWORDS), max_size=8), max_size=4),
    st.frozensets(st.sampled_from(_KEYWORDS), max_size=10),
)
def test_the_matcher_answers_as_could_match(
    new: list[frozenset[str]], stored: frozenset[str]
) -> None:
    expected = any(could_match(s, stored, threshold=T) for s in new if s)
    assert Matcher(new, threshold=T)(stored) == expected


def store_frequency(store: list[MemoryRecord]) -> dict[str, int]:
    return dict(Counter(word for m in store for word in m.keywords))


@settings(max_examples=400, deadline=None)
@given(st.lists(statement(), min_size=1, max_size=10), store_strategy())
def test_the_lookup_finds_every_duplicate_and_conflict_and_plans_alike(
    new: list[str], store: list[MemoryRecord]
) -> None:
    new_sets = [keywords(text) for text in new]
    found = found_by_lookup(new_sets, store, store_frequency(store), total=len(store))
    assert exhaustive(new, store) <= {m.id for m in found}
    sightings = [sighting(text) for text in new]
    rules = {"threshold": T, "min_keywords": M}
    assert plan(sightings, found, now=NOW, **rules) == plan(sightings, store, now=NOW, **rules)
    # what the store returns of them, the memories the plan reads: the same plan, for the
    # batch and for any part of it (the store stage drops the fingerprinted ones after
    # the lookup), and the same match for a fact added by hand
    read = needed_by_plan(new, found)
    assert plan(sightings, read, now=NOW, **rules) == plan(sightings, store, now=NOW, **rules)
    for part in (sightings[:1], sightings[1::2]):
        assert plan(part, read, now=NOW, **rules) == plan(part, store, now=NOW, **rules)
    for text in new:
        assert duplicate_of(text, keywords(text), read, **rules) == duplicate_of(
            text, keywords(text), store, **rules
        )


@settings(max_examples=200, deadline=None)
@given(
    st.lists(statement(), min_size=1, max_size=5),
    store_strategy(),
    st.dictionaries(st.sampled_from(_COMMON + _TAIL + ["user"]), st.integers(0, 1000)),
    st.integers(0, 2000),
)
def test_stale_or_wrong_frequencies_cost_speed_never_a_candidate(
    new: list[str], store: list[MemoryRecord], frequency: dict[str, int], total: int
) -> None:
    found = found_by_lookup([keywords(text) for text in new], store, frequency, total=total)
    assert exhaustive(new, store) <= {m.id for m in found}


@given(st.frozensets(st.sampled_from([*_TAIL, "user", "java"]), min_size=1))
def test_a_probe_reads_the_rarest_keywords(words: frozenset[str]) -> None:
    frequency = {word: 1000 if word in ("user", "java") else 3 for word in words}
    made = probe(words, frequency, threshold=T)
    assert made is not None
    alpha = required_overlap(len(words), T)
    assert len(made.words) - made.at_least[0] == len(words) - alpha  # the overlap bound
    rare = sorted(w for w in words if w not in ("user", "java"))
    # the common words come last, and are read only when nothing rarer is left
    assert list(made.words[: len(rare)]) == rare[: len(made.words)]


def test_a_keyword_is_read_only_when_its_postings_cost_less_than_the_rows_it_saves() -> None:
    words = frozenset({"everyone", "allerg", "peanut"})  # α = 2: a prefix of two
    common = {"everyone": 1_000_000, "allerg": 6_800, "peanut": 850}
    made = probe(words, common, threshold=T, total=1_000_000)
    # 1M postings for at most 7,650 rows: not worth it
    assert made is not None and made.words == ("peanut", "allerg") and made.at_least[0] == 1
    rarer = {"everyone": 60_000, "allerg": 6_800, "peanut": 850}
    made = probe(words, rarer, threshold=T, total=1_000_000)
    assert made is not None and made.words == ("peanut", "allerg", "everyone")
    assert made.at_least[0] == 2


@given(st.frozensets(st.sampled_from(_TAIL), min_size=1), st.frozensets(st.sampled_from(_TAIL)))
def test_the_length_filter_keeps_every_set_similar_enough(
    a: frozenset[str], b: frozenset[str]
) -> None:
    if len(a & b) / len(a | b) >= T:
        assert length_fits(a, b, threshold=T)


_WIDE = [*sorted(POLARITY_STEMS), *_TAIL]


@settings(max_examples=600, deadline=None)
@given(st.data())
def test_a_probe_passes_every_similar_set_of_every_size(data: st.DataObject) -> None:
    """The sizes' prefixes and counts (and the topic probe standing in for the keyword
    probe of a set without a polarity stem) miss no set the rules call similar."""
    x = data.draw(st.frozensets(st.sampled_from(_WIDE), min_size=1, max_size=14))
    dropped = data.draw(st.frozensets(st.sampled_from(sorted(x))))
    y = (x - dropped) | data.draw(st.frozensets(st.sampled_from(_WIDE), max_size=12))
    frequency = data.draw(st.dictionaries(st.sampled_from(_WIDE), st.integers(0, 5000)))
    made = probes([x], frequency, threshold=T, total=data.draw(st.integers(0, 100_000)))
    found = any(matches(p, y) for p in made)
    if jaccard(x, y) >= T - 1e-9:
        assert found
    topic, other = topic_keywords(x), topic_keywords(y)
    if topic and other and jaccard(topic, other) >= T - 1e-9:
        assert found


def test_a_longer_stored_set_must_share_more_of_the_new_one() -> None:
    new = frozenset(_TAIL[:8])  # α = 5 for a stored set of 5, 8 of 8 for one of 13
    frequency = {word: i for i, word in enumerate(_TAIL)}  # w0 the rarest
    made = probe(new, frequency, threshold=T)
    assert made is not None
    six_of_13 = frozenset(_TAIL[2:8]) | frozenset(_TAIL[20:27])  # the 6 commonest: 6/15
    all_of_13 = new | frozenset(_TAIL[20:25])  # Jaccard 8/13
    assert not matches(made, six_of_13)
    assert matches(made, all_of_13)
    assert made.reads(13) < made.reads(5)  # its prefix is shorter
    assert not matches(made, new | frozenset(_TAIL[20:26]))  # 14 > 8 / 0.6: too long


def test_the_least_overlap_is_the_least_by_the_matchers_division() -> None:
    for t in (1 / 3, 0.5, T, 0.7, 0.75, 0.8, 0.9, 1.0):
        for n in range(1, 160):
            for s in range(max(1, math.ceil(t * n - 1e-9)), math.floor(n / t + 1e-9) + 1):
                counted = next(
                    (o for o in range(1, min(n, s) + 1) if o / (n + s - o) >= t - 1e-9),
                    min(n, s) + 1,
                )
                assert _least_overlap(n, s, t) == counted, (t, n, s)


@given(st.lists(st.integers(1, 30), min_size=1, max_size=40), st.integers(1, 60), st.data())
def test_each_keyword_is_read_up_to_the_largest_size_whose_prefix_reaches_it(
    prefix: list[int], first: int, data: st.DataObject
) -> None:
    sizes = range(first, first + len(prefix))
    read = data.draw(st.integers(1, max(prefix)))
    expected = tuple(
        max(s for s, k in zip(sizes, prefix, strict=True) if k > i) for i in range(read)
    )
    assert _largest(sizes, prefix, read) == expected
