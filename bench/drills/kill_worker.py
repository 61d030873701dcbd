"""Drill: workers SIGKILLed three times mid-run lose nothing and store nothing twice.

1,000 transcripts (100 users x 10, the offline extractor, so every run extracts the same
memories) go through the fleet twice: a clean run, then a run in which a worker's whole
process group is SIGKILLed at 25%, 50% and 75% of the jobs (the store worker, the
extract worker, the store worker again) and restarted at once. Beat's sweep republishes
the jobs the dead workers held. Expected: every job done, the same active memories as the
clean run (and as computed in advance, see bench/drills/common.py), no memory stored
twice, each user's repeated fact confirmed exactly once per transcript.

    python -m bench.drills.kill_worker [--users 100 --per-user 10]
"""

from __future__ import annotations

import argparse
import itertools
import time
from typing import Any

from bench.common import REDIS_URL, pg_database, table_counts
from bench.drills.common import Verdict, drill_corpus, expected_active
from bench.drills.fleet_run import RunResult, note_restarts, run_corpus
from bench.fleet import Fleet, job_counts

KILLS = (("store", 0.25), ("extract", 0.50), ("store", 0.75))


def killer(db_url: str) -> Any:
    roles = itertools.cycle(role for role, _ in KILLS)

    def damage(fleet: Fleet, _: dict[str, int]) -> dict[str, Any]:
        role = next(roles)
        # Jobs are short: wait (briefly) for a moment when one is running, so the kill
        # lands mid-task and not between two.
        deadline = time.monotonic() + 10
        while (running := job_counts(db_url).get("running", 0)) == 0:
            if time.monotonic() > deadline:
                break
            time.sleep(0.005)
        fleet.workers[role].kill()
        fleet.start(role)
        return {"killed": role, "jobs_running_at_kill": running}

    return damage


def checks(
    verdict: Verdict, name: str, run: RunResult, total: int, users: int, per_user: int, db_url: str
) -> None:
    verdict.check(f"{name}: jobs done", total, run.counts.get("done", 0))
    verdict.check(f"{name}: jobs failed or unfinished", 0, total - run.counts.get("done", 0))
    verdict.check(f"{name}: active memories", expected_active(users, per_user), run.state.active)
    verdict.check(f"{name}: memories stored twice", 0, run.state.duplicates)
    verdict.check(
        f"{name}: users whose repeated fact has access_count {per_user}",
        users,
        run.state.signatures_confirmed,
    )
    verdict.check(
        f"{name}: episodes (one per job)", total, table_counts(db_url, ["episodes"])["episodes"]
    )
    verdict.note(f"{name}: seconds", round(run.seconds, 1))
    note_restarts(verdict, f"{name}: ", run)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--users", type=int, default=100)
    p.add_argument("--per-user", type=int, default=10)
    args = p.parse_args(argv)
    db_url = pg_database("memlane_drill")
    corpus = drill_corpus(args.users, args.per_user)
    total = len(corpus)
    verdict = Verdict("kill_worker")

    clean = run_corpus(db_url, REDIS_URL, corpus, users=args.users, per_user=args.per_user)
    checks(verdict, "clean run", clean, total, args.users, args.per_user, db_url)

    killed = run_corpus(
        db_url,
        REDIS_URL,
        corpus,
        users=args.users,
        per_user=args.per_user,
        marks=[share for _, share in KILLS],
        damage=killer(db_url),
    )
    for event in killed.events:
        verdict.note(
            f"kill at {event['at_share']:.0%}",
            f"{event['killed']} worker, {event['jobs_running_at_kill']} jobs running",
        )
    verdict.check(
        "kills landed mid-run (jobs running)",
        len(KILLS),
        sum(1 for e in killed.events if e["jobs_running_at_kill"] > 0),
    )
    checks(verdict, "killed run", killed, total, args.users, args.per_user, db_url)
    verdict.check("killed run memories == clean run's", clean.state.active, killed.state.active)
    raised = [run.enqueue_errors + run.enqueues_kept for run in (killed, clean)]
    verdict.check("enqueue errors", 0, sum(map(len, raised)))
    return verdict.finish()


if __name__ == "__main__":
    raise SystemExit(main())
