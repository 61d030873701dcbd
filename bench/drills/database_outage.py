"""Drill: the database refuses connections for 12 s while extractions are in flight; the
jobs they held run again as soon as it is back, not after the stuck sweep.

The fleet (extract on threads, store on prefork, beat) runs 100 transcripts (10 users x 10)
against an LLM stub that answers after `--llm-delay` s, so many jobs are claimed and
waiting on the model when, at 30% of the jobs, the drill database stops accepting
connections and its open ones are terminated (bench.drills.db_outage: ALTER DATABASE …
ALLOW_CONNECTIONS false and pg_terminate_backend, only this database, never a restart of
the server others share). The stuck sweep is left at production's 600 s, so it cannot be
what brings the jobs back. Expected: every job claimed before the outage out of `running`
within `--resume-within` s of the database's return, every job done, nothing twice.

    python -m bench.drills.database_outage [--outage 12 --llm-delay 1.5]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import make_url

from bench.common import REDIS_URL, pg_database
from bench.drills.common import Verdict, drill_corpus
from bench.drills.db_outage import outage
from bench.drills.fleet_run import note_restarts, run_corpus
from bench.fleet import Fleet
from memlane.models.db import unit_of_work
from memlane.models.tables import Job
from tests.llm_stub import LLMStub


def running_ids(db_url: str) -> set[str]:
    with unit_of_work(db_url) as session:
        return set(session.scalars(select(Job.id).where(Job.status == "running")))


def outage_damage(db_url: str, seconds: float, resume_within: float) -> Any:
    database = str(make_url(db_url).database)

    def damage(_fleet: Fleet, _: dict[str, int]) -> dict[str, Any]:
        deadline = time.monotonic() + 30
        while not (held := running_ids(db_url)) and time.monotonic() < deadline:
            time.sleep(0.05)
        outage(database, seconds)
        back = time.monotonic()
        # How long the jobs held at the outage stay `running` once the database is back.
        while (still := held & running_ids(db_url)) and time.monotonic() - back < resume_within:
            time.sleep(0.2)
        return {
            "held": len(held),
            "still_running": len(still),
            "resumed_in_s": round(time.monotonic() - back, 1),
        }

    return damage


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--users", type=int, default=10)
    p.add_argument("--per-user", type=int, default=10)
    p.add_argument("--outage", type=float, default=12.0, help="seconds connections are refused")
    p.add_argument("--llm-delay", type=float, default=1.5, help="seconds each LLM answer takes")
    p.add_argument("--resume-within", type=float, default=60.0)
    args = p.parse_args(argv)
    db_url = pg_database("memlane_drill_dbout")
    corpus = drill_corpus(args.users, args.per_user)
    total = len(corpus)
    verdict = Verdict("database_outage")
    with LLMStub(delay_s=args.llm_delay) as stub:
        stub.answer(memories=[])
        run = run_corpus(
            db_url,
            REDIS_URL,
            corpus,
            users=args.users,
            per_user=args.per_user,
            marks=[0.3],
            damage=outage_damage(db_url, args.outage, args.resume_within),
            timeout=args.resume_within + 120,
            llm_model="openai/stub-model",
            llm_api_base=stub.base_url,
            llm_api_key="x",
            stuck_after_s="600",  # production's: the sweep must not be what rescues them
        )
    (event,) = run.events or [{"held": 0, "still_running": 0, "resumed_in_s": None}]
    verdict.note("database refused connections for (s)", args.outage)
    verdict.check("jobs running when it went away", "> 0", event["held"], event["held"] > 0)
    verdict.check(
        f"of them still running {args.resume_within:g} s after it came back",
        0,
        event["still_running"],
    )
    verdict.note("seconds until none of them was running", event["resumed_in_s"])
    verdict.note("enqueues that raised, nothing stored", len(run.enqueue_errors))
    verdict.note("enqueues that raised, stored and queued", len(run.enqueues_kept))
    note_restarts(verdict, "", run)
    stored = total - len(run.enqueue_errors)
    verdict.check("jobs done", stored, run.counts.get("done", 0))
    verdict.check("jobs not done", 0, sum(run.counts.values()) - run.counts.get("done", 0))
    verdict.check("memories stored twice", 0, run.state.duplicates)
    if not run.enqueue_errors:
        verdict.note("active memories (stub answers none)", run.state.active)
    return verdict.finish()


if __name__ == "__main__":
    raise SystemExit(main())
