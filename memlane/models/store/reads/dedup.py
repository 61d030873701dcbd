"""The dedup lookup: which stored memories the plan of a batch of new ones reads, found
through the keyword index by the prefix filter (memlane.pipeline.dedup.prefix_filter), checked
exactly on their keywords, and narrowed to the plan's needs (memlane.pipeline.dedup.needs)
before any record is built.

At most three round trips whatever the store's size: the new keywords' frequencies in the
user's store; the status, keywords and text of the memories the probes find (each
probe's postings grouped in the index, nothing read of a memory that shares too few of
its keywords); the whole rows of those the plan reads (none, most often; one per new
statement at most, or the memories an inserted one contradicts). The first two are sent
as SQL text for the driver (`exec_driver_sql`, in the session's transaction): they run on
every store job, and compiled from ORM statements each cost ~0.5 ms more of Python
(bench/README.md). The third is a Core statement built once, run on the session's
connection.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import String, any_, bindparam, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session

from memlane.models.store.memories import keyword_index
from memlane.models.store.rows import memory_record, record_columns
from memlane.models.tables import MemoryRow
from memlane.pipeline.dedup.needs import Found, needed
from memlane.pipeline.dedup.prefix_filter import Matcher, Probe, probes
from memlane.pipeline.records import MemoryRecord


def candidates(
    session: Session,
    user_id: str,
    statements: Sequence[tuple[str, frozenset[str]]],
    *,
    threshold: float,
    min_keywords: int,
    agent_id: str | None = None,
) -> list[MemoryRecord]:
    """The active and forgotten memories of the user that `agent_id` sees (the shared
    ones and its own, pipeline.scope: dedup compares within what one assembly sees
    together; None, the shared ones) (a forgotten one stays forgotten:
    pipeline.dedup.plan rule 0) that the plan of the new (text, keywords) statements reads, in
    id order: each statement's best duplicate, or the memories it contradicts
    (pipeline.dedup.needs). `dedup.plan` over them decides as over the whole store (a
    keyword-less text's exact repeat excepted: it has no keyword to be found by)."""
    may = found(
        session,
        user_id,
        [words for _, words in statements],
        threshold=threshold,
        agent_id=agent_id,
    )
    ids = needed(statements, may, threshold=threshold, min_keywords=min_keywords)
    if not ids:
        return []
    words = {memory.id: memory.keywords for memory in may}
    connection = session.connection()
    # Built once (`_NEEDED`) and run on the session's connection, not built and run
    # through the ORM session on every call: that cost most of the read, and a lookup
    # that finds a duplicate pays it, more of them the larger the store (bench/README.md).
    postgres = connection.dialect.name == "postgresql"
    rows = connection.execute(_NEEDED[postgres], {"ids": ids}).all()
    return [memory_record(row, words[row[_ID]]) for row in rows]


def found(
    session: Session,
    user_id: str,
    keyword_sets: Sequence[frozenset[str]],
    *,
    threshold: float,
    agent_id: str | None = None,
) -> list[Found]:
    """Every active or forgotten memory of the user `agent_id` sees whose keywords may duplicate or
    contradict one of the sets (`prefix_filter.could_match`), in the index's order: all
    that do (a keyword-less text's exact repeat excepted)."""
    sets = [words for words in keyword_sets if words]
    if not sets:
        return []
    sql = _Sql(session)
    every = set().union(*sets)
    wanted = sorted({keyword_index.posting(w) for w in every} | {keyword_index.TOTAL})
    counted = dict(sql.rows(*sql.frequencies(user_id, wanted)))
    total = counted.pop(keyword_index.TOTAL, 0)
    frequency = {w: counted.get(keyword_index.posting(w), 0) for w in every}
    made = probes(sets, frequency, threshold=threshold, total=total)
    # What the choice reads of every memory a probe finds: most often none may match;
    # for a short common statement, hundreds do. Their keywords parsed at once.
    light = sql.rows(*sql.found(user_id, made, agent_id))
    parsed = json.loads("[" + ",".join(words or "[]" for _, _, words, _ in light) + "]")
    may_match = Matcher(sets, threshold=threshold)
    return [
        Found(memory_id, status, stored, content)
        for (memory_id, status, _, content), listed in zip(light, parsed, strict=True)
        if may_match(stored := frozenset(listed))
    ]


_ID = [column.key for column in record_columns()].index("id")
# A statement that duplicates nothing may contradict hundreds: one array parameter on
# PostgreSQL, not as many bound values rendered into the statement.
_NEEDED = {
    postgres: select(*record_columns()).where(wanted).order_by(MemoryRow.id)
    for postgres, wanted in (
        (True, MemoryRow.id == any_(bindparam("ids", type_=ARRAY(String)))),
        (False, MemoryRow.id.in_(bindparam("ids", expanding=True))),
    )
}


class _Sql:
    """The two index reads as SQL text for the session's driver: psycopg (`%(name)s`,
    a word list as one array parameter, so a statement's text depends only on how many
    probes it has and psycopg prepares it) or sqlite3 (`:name`, IN lists)."""

    def __init__(self, session: Session) -> None:
        self.connection = session.connection()
        self.postgres = self.connection.dialect.name == "postgresql"

    def rows(self, text: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        # exec_driver_sql: no compiling, but SQLAlchemy's events and logging still see it;
        # the driver's own fetchall, not a Row per row (hundreds for a short statement)
        result = self.connection.exec_driver_sql(text, params)
        rows = [tuple(row) for row in result.cursor.fetchall()] if result.returns_rows else []
        result.close()
        return rows

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

    def found(
        self, user_id: str, made: Sequence[Probe], agent_id: str | None
    ) -> tuple[str, dict[str, Any]]:
        """The id, status, keywords (JSON text) and text of every active or forgotten
        memory a probe finds: each probe's postings read in the index (user, keyword,
        topic size, size) within each word's size range, counted per memory, and only the
        rows of the memories found that often read."""
        params: dict[str, Any] = {"user_id": user_id, "agent_id": agent_id}
        parts = [self._probe(i, probe, params) for i, probe in enumerate(made)]
        keywords = "CAST(keywords AS TEXT)" if self.postgres else "keywords"
        text = (
            f"SELECT id, status, {keywords}, content FROM memories"
            f" WHERE id IN ({' UNION '.join(parts)}) AND status IN ('active', 'deleted')"
            # NULL (no agent) matches no agent_id: the shared memories alone
            f" AND (agent_id IS NULL OR agent_id = {self._param('agent_id')})"
        )
        return text, params

    def _probe(self, i: int, probe: Probe, params: dict[str, Any]) -> str:
        words, largest, at_least = _postings(probe)
        size = "topic_count" if probe.topic else "keyword_count"
        # topic_count ≤ keyword_count: the index's range on its leading size holds both
        ranged = (
            "topic_count BETWEEN {low} AND {high}"
            if probe.topic
            else "topic_count <= {high} AND keyword_count BETWEEN {low} AND {high}"
        )
        params[f"lo{i}"] = probe.smallest
        low = self._param(f"lo{i}")
        # Most often every size needs the same count (1 + the keywords read past the
        # prefix): one value then, and the memory alone as the group (its sizes are one
        # per memory), not a count looked up per group by its size.
        same = len(set(at_least)) == 1
        if same:
            params[f"n{i}"] = at_least[0]
        if self.postgres:
            params[f"w{i}"], params[f"h{i}"] = words, largest
            if not same:
                params[f"n{i}"] = at_least
            need = (
                self._param(f"n{i}")
                if same
                else f"(CAST({self._param(f'n{i}')} AS int[]))[k.{size} - {low} + 1]"
            )
            return (
                f"SELECT k.memory_id FROM unnest(CAST({self._param(f'w{i}')} AS text[]),"
                f" CAST({self._param(f'h{i}')} AS int[])) AS p(keyword, largest)"
                " JOIN memory_keywords k ON k.keyword = p.keyword"
                f" WHERE k.user_id = {self._param('user_id')} AND "
                + ranged.format(low=low, high="p.largest")
                + f" GROUP BY k.memory_id{'' if same else f', k.{size}'}"
                f" HAVING count(*) >= {need}"
            )
        reads = []
        for j, (word, high) in enumerate(zip(words, largest, strict=True)):
            params[f"w{i}_{j}"], params[f"h{i}_{j}"] = word, high
            reads.append(
                f"SELECT memory_id{'' if same else f', {size} AS size'} FROM memory_keywords"
                f" WHERE user_id = {self._param('user_id')} AND"
                f" keyword = {self._param(f'w{i}_{j}')} AND "
                + ranged.format(low=low, high=self._param(f"h{i}_{j}"))
            )
        if same:
            return (
                f"SELECT memory_id FROM ({' UNION ALL '.join(reads)}) GROUP BY memory_id"
                f" HAVING count(*) >= {self._param(f'n{i}')}"
            )
        cases = []
        for j, need_j in enumerate(at_least):
            params[f"n{i}_{j}"] = need_j
            cases.append(f"WHEN {j} THEN {self._param(f'n{i}_{j}')}")
        return (
            f"SELECT memory_id FROM ({' UNION ALL '.join(reads)}) GROUP BY memory_id, size"
            f" HAVING count(*) >= CASE size - {low} {' '.join(cases)} END"
        )


def _postings(probe: Probe) -> tuple[list[str], list[int], list[int]]:
    """The probe as postings: its words cut to the index's length, each with the largest
    size it is read for, and the count needed at each size. Two words of over 100
    characters may share one posting: it is read for either's sizes, and where both are
    read it counts once for two."""
    keys = [keyword_index.posting(word) for word in probe.words]
    largest: dict[str, int] = {}
    for key, high in zip(keys, probe.largest, strict=True):
        largest[key] = max(high, largest.get(key, high))
    words = sorted(largest)
    if len(largest) == len(keys):  # no two words share a posting (all but always)
        return words, [largest[w] for w in words], [max(1, need) for need in probe.at_least]
    distinct = [0]  # distinct postings among the first m words, for every m
    seen: set[str] = set()
    for key in keys:
        seen.add(key)
        distinct.append(len(seen))
    at_least = []
    for j, need in enumerate(probe.at_least):
        read = probe.reads(probe.smallest + j)
        at_least.append(max(1, need - (read - distinct[read])))
    return words, [largest[w] for w in words], at_least
