"""Drill: an LLM slower than the timeout. The stub answers every call after `--delay`
(30 s) while the workers give up after `--timeout` (10 s): each job retries a bounded
number of times, then fails with its reason; no attempt runs past the task's hard time
limit, and nothing is left queued or running.

A fleet (extract + store workers, beat) runs on the drill database; 8 transcripts
(4 users x 2) are enqueued; a thread reads the jobs table every 0.25 s and measures how
long each job stays `running` in one go (one attempt). The sweep's deadline is set above
the hard limit, as in production (a shorter one would take a slow attempt for a lost
one and run it twice).

    python -m bench.drills.slow_consumer [--delay 30 --timeout 10]
"""

from __future__ import annotations

import argparse
import threading
import time
from collections import Counter

from sqlalchemy import select

from bench.common import REDIS_URL, pg_database
from bench.drills.common import Verdict, drill_corpus
from bench.drills.flaky_llm import calls_per_conversation
from bench.drills.fleet_run import note_restarts, run_corpus
from memlane.config.settings import load_settings
from memlane.models.db import unit_of_work
from memlane.models.tables import Job
from memlane.workers.app import celery_config
from tests.llm_stub import LLMStub


class RunningSpans:
    """The longest unbroken stretch each job spent `running`, polled from the store."""

    def __init__(self, db_url: str, poll_s: float = 0.25) -> None:
        self.db_url, self.poll_s = db_url, poll_s
        self.longest: dict[str, float] = {}
        self._since: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RunningSpans:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                with unit_of_work(self.db_url) as session:
                    rows = session.execute(select(Job.id, Job.status)).all()
            except Exception:  # the table is emptied as the run starts
                continue
            now = time.monotonic()
            for job_id, status in rows:
                if status == "running":
                    started = self._since.setdefault(job_id, now)
                    self.longest[job_id] = max(self.longest.get(job_id, 0.0), now - started)
                else:
                    self._since.pop(job_id, None)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--delay", type=float, default=30.0, help="seconds the LLM takes")
    p.add_argument("--timeout", type=float, default=10.0, help="MEMLANE_LLM_TIMEOUT_S")
    p.add_argument("--retries", type=int, default=5, help="MEMLANE_LLM_MAX_RETRIES")
    p.add_argument("--users", type=int, default=4)
    p.add_argument("--per-user", type=int, default=2)
    args = p.parse_args(argv)
    db_url = pg_database("memlane_drill")
    corpus = drill_corpus(args.users, args.per_user, prefix="slow-user")
    settings = {
        "llm_model": "openai/stub-model",
        "llm_timeout_s": f"{args.timeout:g}",
        "llm_max_retries": str(args.retries),
        "llm_api_key": "x",
    }
    hard_limit = celery_config(load_settings(broker_url=REDIS_URL, **settings))["task_time_limit"]
    bound = args.retries + 1
    verdict = Verdict("slow_consumer")
    with LLMStub(delay_s=args.delay) as stub, RunningSpans(db_url) as spans:
        run = run_corpus(
            db_url,
            REDIS_URL,
            corpus,
            users=args.users,
            per_user=args.per_user,
            timeout=900,
            llm_api_base=stub.base_url,
            stuck_after_s=str(hard_limit * 2),
            llm_model=settings["llm_model"],
            llm_timeout_s=settings["llm_timeout_s"],
            llm_max_retries=settings["llm_max_retries"],
            llm_api_key=settings["llm_api_key"],
        )
        calls = calls_per_conversation(stub, corpus)
    with unit_of_work(db_url) as session:
        jobs = session.execute(select(Job.status, Job.attempts, Job.last_error)).all()
    verdict.note("LLM answers after (s)", args.delay)
    verdict.note("timeout (s)", args.timeout)
    verdict.note("task hard time limit (s)", hard_limit)
    note_restarts(verdict, "", run)
    verdict.check("jobs created", len(corpus), len(jobs))
    verdict.check(
        "jobs failed (none done, queued or running)", len(corpus), run.counts.get("failed", 0)
    )
    reasons = Counter((job.last_error or "").split(":")[0][:80] for job in jobs)
    for reason, count in reasons.items():
        verdict.note(f"failed: {reason}", count)
    verdict.check(
        "failed jobs whose reason names the timeout",
        len(jobs),
        sum(
            1
            for job in jobs
            if "timed out" in (job.last_error or "").lower()
            or "timeout" in (job.last_error or "").lower()
        ),
    )
    most = max((job.attempts for job in jobs), default=0)
    verdict.check(f"attempts of a job <= {bound}", f"<= {bound}", most, most <= bound)
    most_calls = max(calls.values(), default=0)
    verdict.check(
        f"LLM calls for one transcript <= {bound}", f"<= {bound}", most_calls, most_calls <= bound
    )
    verdict.check("calls traced to a transcript", 0, calls.get("unknown", 0))
    longest = max(spans.longest.values(), default=0.0)
    verdict.check(
        f"longest attempt <= hard limit {hard_limit} s",
        f"<= {hard_limit}",
        round(longest, 1),
        longest <= hard_limit,
    )
    verdict.note("seconds until every job ended", round(run.seconds, 1))
    return verdict.finish()


if __name__ == "__main__":
    raise SystemExit(main())
