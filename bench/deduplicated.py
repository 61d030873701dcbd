"""A store as the store stage leaves it: no two memories duplicates by dedup's rule.

bench.dataset draws sentences from a few templates, so a bulk-loaded store repeats them:
at 100k, a short template sentence is stored ~3,000 times, and an exact dedup lookup
returns every copy. The store stage never stores a duplicate (it confirms the memory it
duplicates), so such a store measures a lookup no user's store needs. `DedupFilter`
keeps a drawn sentence only when it duplicates no sentence kept before it: the same
rule as `memlane.pipeline.dedup.similarity.statements_duplicate` (equal normalised texts, or
Jaccard ≥ threshold with ≥ min_keywords keywords on each side and the same polarity),
whatever the kept one's status (a forgotten memory swallows its duplicates too: dedup's
rule 0). Candidates come from an in-memory inverted index by the same prefix filter the
store uses (exact: tests/unit/test_prefix_filter_properties.py). Conflicts are left as
drawn: the store stage would supersede the older of two (a status, not a row less).
"""

from __future__ import annotations

from collections import Counter, defaultdict

from memlane.config.settings import load_settings
from memlane.pipeline.dedup.keywords import keywords
from memlane.pipeline.dedup.prefix_filter import matches, probe
from memlane.pipeline.dedup.similarity import Statement, statements_duplicate


class DedupFilter:
    """Sentences kept so far, indexed by keyword and by normalised text."""

    def __init__(self, *, threshold: float, min_keywords: int) -> None:
        self.threshold = threshold
        self.min_keywords = min_keywords
        self.kept: list[Statement] = []
        self.postings: defaultdict[str, list[int]] = defaultdict(list)
        self.frequency: Counter[str] = Counter()
        self.texts: set[str] = set()
        self.dropped = 0

    def duplicates_kept(self, statement: Statement) -> bool:
        if statement.normalised in self.texts:
            return True
        if len(statement.keywords) < self.min_keywords:
            return False  # below min_keywords only the same text is a duplicate
        found = probe(
            statement.keywords,
            self.frequency,
            threshold=self.threshold,
            total=len(self.kept),
        )
        assert found is not None  # the set is not empty
        hits = {index for word in found.words for index in self.postings.get(word, ())}
        enough = [index for index in sorted(hits) if matches(found, self.kept[index].keywords)]
        return any(
            statements_duplicate(
                statement,
                self.kept[index],
                threshold=self.threshold,
                min_keywords=self.min_keywords,
            )
            for index in enough
        )

    def keep(self, text: str) -> bool:
        """Whether `text` may be stored; if so, it is kept (later ones are checked
        against it)."""
        statement = Statement.of(text, keywords(text))
        if self.duplicates_kept(statement):
            self.dropped += 1
            return False
        index = len(self.kept)
        self.kept.append(statement)
        self.texts.add(statement.normalised)
        for word in statement.keywords:
            self.postings[word].append(index)
        self.frequency.update(statement.keywords)
        return True


def deduplicated_filter() -> DedupFilter:
    settings = load_settings()
    return DedupFilter(threshold=settings.dedup_threshold, min_keywords=settings.dedup_min_keywords)
