"""Drill: tenant isolation under load. No context ever holds another user's memory.

50 users' transcripts (4 each; every user's facts carry the user's canary word,
`cnry07zq` for user 7) are enqueued from 8 threads at once and run through the fleet,
while 4 threads make 1,000 assemblies for random users, strategies and budgets; half
of the queries name another user's canary, inviting a leak. Each context is checked
twice: by ids (every memory and episode in its pack belongs to the asking user, checked
against the database afterwards) and by words (the only canary its text may hold is the
user's own).

    python -m bench.drills.tenant_isolation [--users 50 --assemblies 1000]
"""

from __future__ import annotations

import argparse
import random
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from bench.common import REDIS_URL, pg_database
from bench.drills.common import Verdict, drill_transcript
from bench.drills.fleet_run import run_corpus
from memlane.config.settings import load_settings
from memlane.models.db import unit_of_work
from memlane.models.tables import EpisodeRow, MemoryRow
from memlane.pipeline.ranking.scoring import STRATEGIES
from memlane.service.facade import Memlane

PER_USER = 4
CANARY = re.compile(r"cnry(\d\d)zq")


def canary(user: int) -> str:
    return f"cnry{user:02d}zq"


def user_name(user: int) -> str:
    return f"tenant{user:02d}"


@dataclass
class Seen:
    """What the assemblies saw: (user, item id, section) and canary leaks, thread-safe."""

    items: list[tuple[str, str, str]] = field(default_factory=list)
    word_leaks: list[str] = field(default_factory=list)
    with_memories: int = 0
    with_own_canary: int = 0
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def assemble_one(lane: Memlane, users: int, seed: int, seen: Seen) -> None:
    rng = random.Random(seed)
    me = rng.randrange(users)
    other = rng.choice([u for u in range(users) if u != me])
    query = (
        f"What does the user know about {canary(other)}?"
        if rng.random() < 0.5
        else "Which toolkit does the user prefer for work?"
    )
    try:
        result = lane.assemble(
            user_name(me),
            query,
            strategy=rng.choice(STRATEGIES),
            budget_tokens=rng.choice((300, 1000, 4000)),
        )
    except Exception as exc:
        with seen.lock:
            seen.errors.append(f"{type(exc).__name__}: {exc}"[:200])
        return
    found = {int(n) for n in CANARY.findall(result.text)}
    with seen.lock:
        seen.items += [
            (user_name(me), item.id, item.section)
            for item in result.pack.items
            if item.section in ("memory", "episode")
        ]
        seen.items += [(user_name(me), mid, "memory") for mid in result.included_memory_ids]
        seen.word_leaks += [f"{user_name(me)} saw {canary(n)}" for n in found - {me}]
        seen.with_memories += bool(result.included_memory_ids)
        seen.with_own_canary += me in found


def owners(db_url: str) -> dict[tuple[str, str], str]:
    with unit_of_work(db_url) as session:
        memories = session.execute(select(MemoryRow.id, MemoryRow.user_id)).all()
        episodes = session.execute(select(EpisodeRow.id, EpisodeRow.user_id)).all()
    return {("memory", i): u for i, u in memories} | {("episode", i): u for i, u in episodes}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--users", type=int, default=50)
    p.add_argument("--assemblies", type=int, default=1000)
    args = p.parse_args(argv)
    db_url = pg_database("memlane_drill")
    corpus = [
        drill_transcript(user_name(u), t, canary=canary(u))
        for t in range(PER_USER)
        for u in range(args.users)
    ]
    seen = Seen()
    lane = Memlane(load_settings(database_url=db_url, broker_url=REDIS_URL))

    def assemblies_under_load(_fleet: Any, _counts: dict[str, int]) -> dict[str, Any]:
        with ThreadPoolExecutor(4) as pool:
            list(
                pool.map(lambda i: assemble_one(lane, args.users, i, seen), range(args.assemblies))
            )
        return {}

    # The assemblies start as soon as the first job finished, while the rest are ingested.
    run = run_corpus(
        db_url,
        REDIS_URL,
        corpus,
        users=args.users,
        per_user=PER_USER,
        marks=[0.01],
        damage=assemblies_under_load,
        enqueue_threads=8,
    )
    lane.close()
    owner = owners(db_url)
    wrong = [(u, i, s) for u, i, s in seen.items if owner.get((s, i)) != u]

    verdict = Verdict("tenant_isolation")
    verdict.check("transcripts ingested (jobs done)", len(corpus), run.counts.get("done", 0))
    verdict.check("assemblies made", args.assemblies, args.assemblies - len(seen.errors))
    verdict.note("assemblies with memories", seen.with_memories)
    verdict.note("assemblies showing the user's own canary", seen.with_own_canary)
    verdict.note("items checked by id", len(seen.items))
    verdict.check("items of another user (by id)", 0, len(wrong))
    verdict.check("another user's canary in a context (by word)", 0, len(seen.word_leaks))
    if wrong:
        verdict.note("first wrong item", str(wrong[0]))
    if seen.errors:
        verdict.note("first error", seen.errors[0])
    return verdict.finish()


if __name__ == "__main__":
    raise SystemExit(main())
