"""The dedup lookup: which stored memories a batch of new ones may duplicate or conflict
with, read through the keyword index by the prefix filter (memlane.pipeline.prefix_filter)
and checked exactly before their records are built.

Three round trips whatever the store's size: the new keywords' frequencies in the user's
store; the keywords of the memories the probes find (each probe's postings grouped in the
index, nothing read of a memory that shares too few of its keywords); the whole rows of
those that may match.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from sqlalchemy import Select, Text, cast, func, select, type_coerce, union
from sqlalchemy.orm import Session

from memlane.models.store import keyword_index
from memlane.models.store.user_items import keywords_of, memory_record, record_columns
from memlane.models.tables import MemoryKeyword, MemoryRow
from memlane.pipeline.prefix_filter import Probe, could_match, probes
from memlane.pipeline.records import MemoryRecord


def candidates(
    session: Session,
    user_id: str,
    keyword_sets: Sequence[frozenset[str]],
    *,
    threshold: float,
) -> list[MemoryRecord]:
    """Active and forgotten memories of the user (a forgotten one stays forgotten:
    pipeline.dedup rule 0) that may duplicate or conflict with any of the keyword sets:
    every one that does (a keyword-less text's exact repeat excepted: it has no keyword to
    be found by), in id order. `dedup.plan` over them decides as over the whole store."""
    sets = [s for s in keyword_sets if s]
    if not sets:
        return []
    frequency, total = keyword_index.frequencies(session, user_id, set().union(*sets))
    made = probes(sets, frequency, threshold=threshold, total=total)
    found = union(*(_probe(user_id, p) for p in made))
    # The keywords alone first (a memory the probes find is most often no match), then
    # the whole rows of those that may match.
    light = session.execute(
        select(MemoryRow.id, type_coerce(cast(MemoryRow.keywords, Text), Text)).where(
            MemoryRow.id.in_(select(found.subquery().c.memory_id)),
            MemoryRow.status.in_(("active", "deleted")),
        )
    ).all()
    parsed = json.loads("[" + ",".join(words or "[]" for _, words in light) + "]")
    kept = sorted(
        memory_id
        for (memory_id, _), words in zip(light, parsed, strict=True)
        if any(could_match(new, frozenset(words), threshold=threshold) for new in sets)
    )
    if not kept:
        return []
    rows = session.execute(
        select(*record_columns()).where(MemoryRow.id.in_(kept)).order_by(MemoryRow.id)
    ).all()
    return [memory_record(row, words) for row, words in zip(rows, keywords_of(rows), strict=True)]


def _probe(user_id: str, probe: Probe) -> Select[str]:
    words = sorted({keyword_index.posting(w) for w in probe.words})
    postings = select(MemoryKeyword.memory_id).where(
        MemoryKeyword.user_id == user_id, MemoryKeyword.keyword.in_(words)
    )
    # Two words of over 100 characters may share one posting: it counts for both.
    at_least = probe.at_least - (len(probe.words) - len(words))
    if at_least <= 1:
        return postings
    return postings.group_by(MemoryKeyword.memory_id).having(func.count() >= at_least)
