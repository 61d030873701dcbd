"""Which postings a dedup lookup must read: the prefix filter of set-similarity joins
(AllPairs, PPJoin), applied to the probe side of an index that holds every keyword of
every stored memory.

Let x be a new memory's keyword set and t the Jaccard threshold. A stored y with
J(x, y) ≥ t shares at least α(x) = ⌈t·|x|⌉ keywords with x (|x ∩ y| ≥ t·|x ∪ y| ≥ t·|x|).
Put x's keywords in any order: if y missed all of the first |x| − α + 1 of them, it could
share at most α − 1. So y contains one of those "prefix" keywords, whatever the order.
Ordering rarest first (by the keyword's frequency in the user's store) makes the
postings read the shortest ones; a stale frequency only costs speed, never a candidate.

Further keywords: y shares α keywords with x, so among the first k keywords of x
(k ≥ |x| − α + 1) it shares at least m = α − (|x| − k). The lookup reads one keyword
more (and requires one more shared) while that keyword's postings cost less to read
than the rows the probe would find without it (`POSTINGS_PER_ROW`, the rows estimated
from the frequencies): posting lists read in the index instead of fetching every memory
that shares a single rare keyword (on bench.dedup's 100k store: tens of rows at p50,
not ~2,900).

The length filter and the sizes' own prefixes: a stored y of size s has J(x, y) ≥ t only
within t·|x| ≤ s ≤ |x|/t (`length_fits`), and then shares α(s) = the least o with
o / (|x| + s − o) ≥ t, which grows with s (for t = 0.6 and |x| = 8: 5 at s = 5, all 8 at
s = 13). So each size reads its own prefix, |x| − α(s) + 1 keywords (plus the extension
above), and needs its own count; every posting carries its memory's sizes
(models.store.memories.keyword_index), so the index reads only the sizes a keyword is read for.
A long template sentence that shares five common words with a short new one is no
longer read at all.

The same holds for what the polarity guard needs: a conflict needs Jaccard ≥ t between
the topic sets (memlane.pipeline.dedup.similarity), so the topic set gets its own probe, on
the stored topic sets' sizes. For a set with no polarity stem that probe finds its
duplicates too (`probes`). Below min_keywords a duplicate is the same text and a
conflict the same topic: equal keyword (topic) sets, which share every keyword, so every
probe finds them too. A statement with no keyword at all is matched by its exact text
alone, which no keyword index finds.

Not used: PPJoin's positional filter. It bounds the overlap by where a shared keyword
stands in both sets' orders, which must be one global order; the order here is by the
store's current frequencies, and positions stored with a posting would follow the
frequencies at its writing, so the two orders part as the store grows and the bound
would drop true matches. The sizes stay true for as long as the memory's keywords do.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from memlane.pipeline.dedup.keywords import ALL_POLARITY_STEMS, topic_keywords
from memlane.pipeline.dedup.similarity import jaccard

_EPSILON = 1e-9  # 0.6 · 5 is 3.0000000000000004 in floating point
# A posting read in the index (an index-only scan, grouped) costs about a sixteenth of a
# memory row read and checked (PostgreSQL, bench.dedup's 100k store; bench/README.md).
POSTINGS_PER_ROW = 16


def required_overlap(size: int, threshold: float) -> int:
    """α = ⌈t·size⌉ (at least 1): the keywords a set of `size` must share with any set it
    is t-similar to."""
    return max(1, math.ceil(threshold * size - _EPSILON))


@dataclass(frozen=True, slots=True)
class Probe:
    """Read the postings of `words` (rarest first) of the stored memories whose size is
    at least `smallest` and at most `largest[i]` for `words[i]`; a memory of size s found
    `at_least[s - smallest]` times is a candidate, one found fewer times cannot be a
    duplicate or a conflict. A size is of the memory's topic set when `topic`, else of
    its whole keyword set (each posting carries both)."""

    words: tuple[str, ...]
    largest: tuple[int, ...]
    smallest: int
    at_least: tuple[int, ...]
    topic: bool

    def reads(self, size: int) -> int:
        """How many of `words` are read for a memory of that size (a prefix)."""
        return sum(size <= big for big in self.largest)


def probe(
    words: frozenset[str],
    frequency: Mapping[str, int],
    *,
    threshold: float,
    total: int = 0,
    topic: bool = False,
) -> Probe | None:
    """The probe of one keyword set (None for an empty set), rarest keywords first
    (ties by the keyword), a keyword the store lacks counting as 0. `total`: how many
    memories the store indexes (for the estimate of the rows a probe finds). `topic`:
    the stored sizes it filters on are of topic sets (the set is a topic, or has no
    polarity stem: see `probes`)."""
    if not words:
        return None
    n = len(words)
    ordered = sorted(words, key=lambda word: (frequency.get(word, 0), word))
    counts = [frequency.get(word, 0) for word in ordered]
    # The sizes a t-similar set can have (`length_fits`, as `Matcher` computes it) and the
    # keywords it must share at each: o / (n + s − o) ≥ t, the least o.
    smallest = max(1, math.ceil(threshold * n - _EPSILON))
    sizes = range(smallest, math.floor(n / threshold + _EPSILON) + 1)
    overlap = [_least_overlap(n, s, threshold) for s in sizes]
    alpha = overlap[0]
    read = n - alpha + 1
    size = max([total, *counts, 1])
    # One keyword more (and one more shared keyword required) while reading its postings
    # costs less than reading the rows the probe would find without it.
    while read < n and counts[read] <= POSTINGS_PER_ROW * _rows_found(
        counts[:read], at_least=alpha - (n - read), size=size
    ):
        read += 1
    # A larger stored set must share more (its α(s) grows with s), so its prefix is
    # shorter: each size reads its own n − α(s) + 1 keywords, plus the same extension.
    extra = read - (n - alpha + 1)
    prefix = [min(n, n - a + 1 + extra) for a in overlap]
    at_least = tuple(a - (n - k) for a, k in zip(overlap, prefix, strict=True))
    return Probe(tuple(ordered[:read]), _largest(sizes, prefix, read), smallest, at_least, topic)


def _largest(sizes: range, prefix: list[int], read: int) -> tuple[int, ...]:
    """For each of the first `read` keywords, the largest size whose prefix reaches it
    (max s with prefix[s] > i), in one pass over the sizes and one over the keywords: a
    long statement (100 keywords, ~110 sizes) made this quadratic loop its largest cost."""
    widest: dict[int, int] = {}  # a prefix length → the largest size reading that many
    for s, k in zip(sizes, prefix, strict=True):
        widest[k] = max(s, widest.get(k, s))
    largest = []
    running = 0
    for i in range(max(prefix) - 1, -1, -1):  # the sizes reading more than i keywords
        running = max(running, widest.get(i + 1, 0))
        if i < read:
            largest.append(running)
    return tuple(reversed(largest))


def _least_overlap(n: int, s: int, threshold: float) -> int:
    """The fewest shared keywords o with which sets of n and s keywords have Jaccard ≥ t,
    by the division `Matcher` does (so no float rounding parts the two). That division
    only grows with o, so the least o is found by stepping from the real bound
    o ≥ t·(n + s) / (1 + t) rather than counting up from 1 (a quadratic cost for long
    statements; tests/unit/test_prefix_filter.py checks it against the count)."""
    cap = min(n, s)

    def enough(o: int) -> bool:
        return o / (n + s - o) >= threshold - _EPSILON

    o = min(cap, max(1, math.ceil(threshold * (n + s) / (1 + threshold))))
    while o > 1 and enough(o - 1):
        o -= 1
    while o <= cap and not enough(o):
        o += 1
    return o  # cap + 1 never: within the length bounds o = min(n, s) always is enough


def _rows_found(counts: Sequence[int], *, at_least: int, size: int) -> float:
    """About how many of `size` memories hold at least `at_least` of keywords held by
    `counts` memories each, were keywords independent: size · e_m(p), e_m the elementary
    symmetric polynomial of the keywords' shares p (an upper bound for m = 1)."""
    shares = [min(1.0, count / size) for count in counts]
    sums = [1.0] + [0.0] * at_least
    for share in shares:
        for m in range(at_least, 0, -1):
            sums[m] += sums[m - 1] * share
    return size * sums[at_least]


def probes(
    keyword_sets: Iterable[frozenset[str]],
    frequency: Mapping[str, int],
    *,
    threshold: float,
    total: int = 0,
) -> list[Probe]:
    """Every probe a batch of new memories needs, without repeats: for a set with a
    polarity stem, one of its keywords (stored sizes of whole sets) and one of its topic
    (stored topic sizes, the polarity guard's); for one without, the topic probe alone,
    which finds its duplicates too: x ∩ y = x ∩ topic(y) and topic(y) ⊆ y, so
    J(x, topic(y)) ≥ J(x, y)."""
    found: dict[Probe, None] = {}
    for words in keyword_sets:
        topic = topic_keywords(words)
        parts = [(topic, True)] if topic == words else [(words, False), (topic, True)]
        for part, of_topic in parts:
            made = probe(part, frequency, threshold=threshold, total=total, topic=of_topic)
            if made is not None:
                found[made] = None
    return list(found)


def stored_size(probe_: Probe, stored: frozenset[str]) -> int:
    """The size of a stored keyword set that the probe filters on."""
    return len(topic_keywords(stored)) if probe_.topic else len(stored)


def matches(probe_: Probe, stored: frozenset[str]) -> bool:
    """Whether a stored keyword set passes the probe (what the index lookup computes)."""
    size = stored_size(probe_, stored)
    if not 0 <= size - probe_.smallest < len(probe_.at_least):
        return False
    read = probe_.words[: probe_.reads(size)]
    return sum(word in stored for word in read) >= probe_.at_least[size - probe_.smallest]


def length_fits(new: frozenset[str], stored: frozenset[str], *, threshold: float) -> bool:
    """|stored| within [t·|new|, |new|/t]: a necessary condition of Jaccard ≥ t."""
    size = len(stored)
    return threshold * len(new) - _EPSILON <= size <= len(new) / threshold + _EPSILON


def could_match(new: frozenset[str], stored: frozenset[str], *, threshold: float) -> bool:
    """The keyword sets' part of the rules, exactly: whether a stored memory with these
    keywords can duplicate or conflict with the new one (the texts' polarity and wording,
    which decide the rest, are `memlane.pipeline.dedup.plan.plan`'s to check): never False for
    a stored memory that does.
    - duplicate: the same keywords (the same text has them), or Jaccard ≥ t;
    - conflict: the same topic, or Jaccard(topics) ≥ t."""
    if stored == new:
        return True
    if (
        new
        and length_fits(new, stored, threshold=threshold)
        and jaccard(new, stored) >= threshold - _EPSILON
    ):
        return True
    topic, other = topic_keywords(new), topic_keywords(stored)
    if not topic or not other:
        return False
    return topic == other or jaccard(topic, other) >= threshold - _EPSILON


class Matcher:
    """`could_match(new, stored)` for any of a batch of new keyword sets, with what each
    new set's checks need computed once, and each check's cheap part first (the sizes):
    the store runs it on every memory a probe finds, hundreds for a short, common
    statement. Always the same answer as `any(could_match(...))`."""

    def __init__(self, new_sets: Iterable[frozenset[str]], *, threshold: float) -> None:
        self.threshold = threshold
        self.sets = [
            (new, len(new), topic, len(topic))
            for new in new_sets
            if new
            for topic in (topic_keywords(new),)
        ]

    def __call__(self, stored: frozenset[str]) -> bool:
        t = self.threshold
        size = len(stored)
        other: frozenset[str] | None = None
        for new, n, topic, topic_n in self.sets:
            if stored == new:
                return True
            if t * n - _EPSILON <= size <= n / t + _EPSILON:
                shared = len(new & stored)
                if shared / (n + size - shared) >= t - _EPSILON:  # Jaccard, as jaccard()
                    return True
            if not topic:
                continue
            if other is None:
                other = (
                    stored if stored.isdisjoint(ALL_POLARITY_STEMS) else stored - ALL_POLARITY_STEMS
                )
            if (
                other
                and t * topic_n - _EPSILON <= len(other) <= topic_n / t + _EPSILON
                and jaccard(topic, other) >= t - _EPSILON
            ):
                return True
        return False
