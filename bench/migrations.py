"""How long a data migration takes on a 100k-memory store.

    python -m bench.migrations [--backends postgresql,sqlite] [--to 0013]

Builds a store at revision 0004 with raw SQL (100 users, 100k memories each evidenced by
a message of its conversation, half of them made by a job, 10k jobs and episodes, 100k
messages), upgrades it untimed to the revision before `--to`, then times the upgrade to
`--to`: 0005 (confirmed_at, refs, dated episodes, the change feed), 0007 (memory_events,
a `created` event per memory), 0008 (fingerprint tables, jobs.suppressed), 0009 (the
erasures table), 0010 (the postings' sizes: for it the store gets ten keywords a memory
at 0009, 1M postings), 0011 (done jobs' extractions dropped: each of the 10k jobs
keeps one of ten memories at 0010), 0012 (the webhook tables), 0013 (the api_keys table),
0014 (languages: one memory in ten and one message in ten is German, so 10k memories
are re-keyed), 0015 (agents: three nullable columns, no row rewritten), 0016 (metadata: a
column on conversations, memories and episodes, GIN indexes on PostgreSQL; no row
rewritten), 0017 (the reply lookup's index on memories). PostgreSQL uses its own scratch
database, dropped afterwards.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

import psycopg
from sqlalchemy import text

from bench.common import DB_SUFFIX, PG_ADMIN_URL, machine, pg_url
from memlane.models import migrate
from memlane.models.db import get_engine

DATABASE = "memlane_bench_migrations" + DB_SUFFIX
MEMORIES = 100_000


def _fill(url: str, postgres: bool) -> None:
    now = "'2026-01-01 00:00:00+00'" if postgres else "'2026-01-01 00:00:00.000000'"
    rows = (
        f"generate_series(0, {MEMORIES - 1}) AS g(i)"
        if postgres
        else "(WITH RECURSIVE g(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM g "
        f"WHERE i < {MEMORIES - 1}) SELECT i FROM g) AS g"
    )
    statements = [
        "INSERT INTO conversations (id, user_id, message_count, assistant_count,"
        " extracted_to_seq, final, created_at, last_message_at)"
        f" SELECT 'c' || i, 'u' || i, 1000, 500, 999, false, {now}, {now} FROM {rows}"
        " WHERE i < 100",
        "INSERT INTO messages (conversation_id, seq, role, content, content_sha256,"
        f" created_at) SELECT 'c' || (i % 100), i / 100, 'user', 'hello', 'x', {now}"
        f" FROM {rows}",
        "INSERT INTO jobs (id, user_id, conversation_id, status, stage, window_start_seq,"
        " window_end_seq, new_from_seq, attempts, created_at, updated_at)"
        f" SELECT 'job' || i, 'u' || (i % 100), 'c' || (i % 100), 'done', 'store', 0,"
        f" i / 100, 0, 1, {now}, {now} FROM {rows} WHERE i < 10000",
        "INSERT INTO memories (id, user_id, content, category, importance, confidence,"
        " tier, status, sensitive, keywords, access_count, created_at, accessed_at,"
        " source_conversation_id, source_job_id, source_from_seq, source_to_seq,"
        " evidence_seq)"
        " SELECT 'mem' || i, 'u' || (i % 100), 'User fact number ' || i, 'fact', 0.5, 1.0,"
        f" 'candidate', 'active', false, '[]', 1, {now}, {now}, 'c' || (i % 100),"
        " CASE WHEN i % 2 = 0 THEN 'job' || (i % 10000) END, i / 100, i / 100, i / 100"
        f" FROM {rows}",
        "INSERT INTO episodes (id, user_id, conversation_id, job_id, summary, topics,"
        f" created_at) SELECT 'ep' || i, 'u' || (i % 100), 'c' || (i % 100), 'job' || i,"
        f" 'summary', '[]', {now} FROM {rows} WHERE i < 10000",
    ]
    with get_engine(url).begin() as conn:
        for statement in statements:
            conn.execute(text(statement))


def _fill_keywords(url: str, postgres: bool) -> None:
    """Ten keywords a memory (one in five with a polarity stem), as the index and the
    memories' keyword lists: the 1M postings 0010 sizes (0006 left the index empty)."""
    rows = (
        "memories m, generate_series(0, 9) AS g(j)"
        if postgres
        else "memories m, (WITH RECURSIVE g(j) AS (SELECT 0 UNION ALL SELECT j + 1 FROM g"
        " WHERE j < 9) SELECT j FROM g) AS g"
    )
    number = "CAST(substr(m.id, 4) AS INTEGER)"
    word = (
        f"CASE WHEN g.j = 0 AND {number} % 5 = 0 THEN 'like'"
        f" ELSE 'w' || g.j || '_' || ({number} % 997) END"
    )
    aggregate = "json_agg(keyword ORDER BY keyword)" if postgres else "json_group_array(keyword)"
    statements = [
        f"INSERT INTO memory_keywords (memory_id, keyword, user_id) SELECT m.id, {word},"
        f" m.user_id FROM {rows}",
        f"UPDATE memories SET keywords = s.words FROM (SELECT memory_id, {aggregate} AS words"
        " FROM memory_keywords GROUP BY memory_id) AS s WHERE memories.id = s.memory_id",
    ]
    with get_engine(url).begin() as conn:
        for statement in statements:
            conn.execute(text(statement))


def _fill_extractions(url: str) -> None:
    """The 10k done jobs each keep an extraction of ten memories and an episode, as
    every done job did before 0011 (what 0011 drops)."""
    memory = {"content": "User fact number 12345 in a sentence.", "category": "fact",
              "importance": 0.5, "confidence": 1.0, "source_seq": 3}  # fmt: skip
    extraction = {
        "memories": [memory] * 10,
        "episode": {"summary": "A conversation about many facts.", "topics": ["facts"]},
    }
    with get_engine(url).begin() as conn:
        conn.execute(text("UPDATE jobs SET extraction = :e"), {"e": json.dumps(extraction)})


def _fill_languages(url: str) -> None:
    """One memory and one message in ten in German: what 0014 re-keys."""
    german = "'Der Nutzer trinkt jeden Morgen grünen Tee, Sorte ' || id"
    statements = [
        f"UPDATE memories SET content = {german} WHERE CAST(substr(id, 4) AS INTEGER) % 10 = 0",
        f"UPDATE messages SET content = {german} WHERE id % 10 = 0",
    ]
    with get_engine(url).begin() as conn:
        for statement in statements:
            conn.execute(text(statement))


def _number(revision: str) -> int:
    """A revision's number: 11 for "0011" (or a branch's "0011_name", before it is renumbered)."""
    return int(revision.split("_", 1)[0])


def _time(url: str, postgres: bool, target: str) -> float:
    migrate.upgrade(url, "0004")
    _fill(url, postgres)
    before = f"{_number(target) - 1:04d}"
    keyed = min(before, "0009")  # the keywords are filled as 0009's schema takes them
    if keyed != "0004":
        migrate.upgrade(url, keyed)
    if _number(target) >= 10:
        _fill_keywords(url, postgres)
    if before != keyed:
        migrate.upgrade(url, before)
    if _number(target) >= 11:
        _fill_extractions(url)
    if _number(target) >= 14:
        _fill_languages(url)
    get_engine(url).dispose()
    started = time.perf_counter()
    migrate.upgrade(url, target)
    elapsed = time.perf_counter() - started
    get_engine(url).dispose()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="postgresql,sqlite")
    parser.add_argument(
        "--to", default=migrate.head_revision(), help="the revision timed (0005 or later)"
    )
    args = parser.parse_args()
    figures: dict[str, float] = {}
    for backend in args.backends.split(","):
        if backend == "postgresql":
            with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
                conn.execute(f'CREATE DATABASE "{DATABASE}"')
            try:
                figures[backend] = _time(pg_url(DATABASE), True, args.to)
            finally:
                with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
        else:
            with tempfile.TemporaryDirectory() as scratch:
                figures[backend] = _time(f"sqlite:///{scratch}/m.db", False, args.to)
        step = f"{_number(args.to) - 1:04d} → {args.to}"
        print(f"{backend}: {step} on {MEMORIES:,} memories in {figures[backend]:.1f} s")
    key = f"seconds_{_number(args.to) - 1:04d}_to_{args.to}"
    print(json.dumps({"machine": machine(), key: figures}))


if __name__ == "__main__":
    main()
