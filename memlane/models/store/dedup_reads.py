"""The dedup lookup: which stored memories a batch of new ones may duplicate or conflict
with, read through the keyword index by the prefix filter (memlane.pipeline.prefix_filter)
and checked exactly before their records are built.

Three round trips whatever the store's size: the new keywords' frequencies in the user's
store; the keywords of the memories the probes find (each probe's postings grouped in the
index, nothing read of a memory that shares too few of its keywords); the whole rows of
those that may match (none, most often). The first two are sent as SQL text for the
driver (`exec_driver_sql`, in the session's transaction): they run on every store job,
and compiled from ORM statements each cost ~0.5 ms more of Python (bench/README.md).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from memlane.models.store import keyword_index
from memlane.models.store.user_items import keywords_of, memory_record, record_columns
from memlane.models.tables import MemoryRow
from memlane.pipeline.prefix_filter import Matcher, Probe, probes
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
    sql = _Sql(session)
    wanted = sorted({keyword_index.posting(w) for w in set().union(*sets)} | {keyword_index.TOTAL})
    frequency = dict(sql.rows(*sql.frequencies(user_id, wanted)))
    total = frequency.pop(keyword_index.TOTAL, 0)
    made = probes(sets, frequency, threshold=threshold, total=total)
    # The keywords alone first (a memory the probes find is most often no match), then
    # the whole rows of those that may match.
    light = sql.rows(*sql.found(user_id, made))
    parsed = json.loads("[" + ",".join(words or "[]" for _, words in light) + "]")
    may_match = Matcher(sets, threshold=threshold)
    kept = sorted(
        memory_id
        for (memory_id, _), words in zip(light, parsed, strict=True)
        if may_match(frozenset(words))
    )
    if not kept:
        return []
    rows = session.execute(
        select(*record_columns()).where(MemoryRow.id.in_(kept)).order_by(MemoryRow.id)
    ).all()
    return [memory_record(row, words) for row, words in zip(rows, keywords_of(rows), strict=True)]


class _Sql:
    """The two index reads as SQL text for the session's driver: psycopg (`%(name)s`,
    a word list as one array parameter, so a statement's text depends only on how many
    probes it has and psycopg prepares it) or sqlite3 (`:name`, IN lists)."""

    def __init__(self, session: Session) -> None:
        self.connection = session.connection()
        self.postgres = self.connection.dialect.name == "postgresql"

    def rows(self, text: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        # exec_driver_sql: no compiling, but SQLAlchemy's events and logging still see it
        return [tuple(row) for row in self.connection.exec_driver_sql(text, params)]

    def _param(self, name: str) -> str:
        return f"%({name})s" if self.postgres else f":{name}"

    def _any_of(self, name: str, words: Sequence[str], params: dict[str, Any]) -> str:
        """`keyword` is one of `words`, the words put in `params`."""
        if self.postgres:
            params[name] = list(words)
            return f"keyword = ANY({self._param(name)})"
        for i, word in enumerate(words):
            params[f"{name}_{i}"] = word
        return f"keyword IN ({', '.join(self._param(f'{name}_{i}') for i in range(len(words)))})"

    def frequencies(self, user_id: str, words: Sequence[str]) -> tuple[str, dict[str, Any]]:
        """How many of the user's memories hold each word (absent: none)."""
        params: dict[str, Any] = {"user_id": user_id}
        text = (
            "SELECT keyword, memories FROM memory_keyword_counts"
            f" WHERE user_id = {self._param('user_id')} AND {self._any_of('w', words, params)}"
        )
        return text, params

    def found(self, user_id: str, made: Sequence[Probe]) -> tuple[str, dict[str, Any]]:
        """The id and keywords (JSON text) of every active or forgotten memory a probe
        finds."""
        params: dict[str, Any] = {"user_id": user_id}
        parts = []
        for i, probe in enumerate(made):
            words = sorted({keyword_index.posting(w) for w in probe.words})
            part = (
                "SELECT memory_id FROM memory_keywords WHERE user_id = "
                f"{self._param('user_id')} AND {self._any_of(f'w{i}', words, params)}"
            )
            # Two words of over 100 characters may share one posting: it counts for both.
            at_least = probe.at_least - (len(probe.words) - len(words))
            if at_least > 1:
                params[f"n{i}"] = at_least
                part += f" GROUP BY memory_id HAVING count(*) >= {self._param(f'n{i}')}"
            parts.append(part)
        keywords = "CAST(keywords AS TEXT)" if self.postgres else "keywords"
        text = (
            f"SELECT id, {keywords} FROM memories WHERE id IN ({' UNION '.join(parts)})"
            " AND status IN ('active', 'deleted')"
        )
        return text, params
