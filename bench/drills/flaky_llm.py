"""Drill: an LLM that fails often. Every job ends done, or failed with its reason; none is
lost; no job calls the model more often than its retry bound allows.

The loopback stub answers 20% of calls with HTTP 500, 10% with 429 + Retry-After: 1, 5%
by holding the request past the client's 2 s timeout and 5% with malformed JSON
(`LLMStub.fail_randomly`, seeded); the rest with an extraction. 200 transcripts
(20 users x 10). The stub runs in this process, so each request is traced back to its
transcript (each transcript's words are unique) and counted.

    python -m bench.drills.flaky_llm [--users 20 --per-user 10]
"""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

from sqlalchemy import select

from bench.common import REDIS_URL, pg_database, table_counts
from bench.drills.common import Verdict, drill_corpus
from bench.drills.fleet_run import note_restarts, run_corpus
from bench.stub import configure
from memlane.config.settings import Settings
from memlane.models.db import unit_of_work
from memlane.models.tables import Job
from tests.llm_stub import LLMStub

LLM_TIMEOUT_S = "2"


def calls_per_conversation(stub: LLMStub, corpus: list[dict[str, Any]]) -> Counter[str]:
    """Chat requests per conversation, found by a statement only that transcript has."""
    marks = {
        item["messages"][2]["content"].split(" Can you")[0]: item["conversation_id"]
        for item in corpus
    }
    calls: Counter[str] = Counter()
    for request in stub.requests:
        prompt = str(request.get("messages", ""))
        owner = next((conv for mark, conv in marks.items() if mark in prompt), "unknown")
        calls[owner] += 1
    return calls


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--users", type=int, default=20)
    p.add_argument("--per-user", type=int, default=10)
    args = p.parse_args(argv)
    db_url = pg_database("memlane_drill")
    corpus = drill_corpus(args.users, args.per_user, prefix="flaky-user")
    total = len(corpus)
    bound = Settings.model_fields["llm_max_retries"].default + 1
    verdict = Verdict("flaky_llm")
    with LLMStub() as stub:
        configure(stub, answer_count=50, drill=True)
        run = run_corpus(
            db_url,
            REDIS_URL,
            corpus,
            users=args.users,
            per_user=args.per_user,
            timeout=900,
            llm_model="openai/stub-model",
            llm_api_base=stub.base_url,
            llm_api_key="x",
            llm_timeout_s=LLM_TIMEOUT_S,
        )
        calls = calls_per_conversation(stub, corpus)
    with unit_of_work(db_url) as session:
        jobs = session.execute(select(Job.status, Job.attempts, Job.last_error, Job.stage)).all()
    done = sum(1 for j in jobs if j.status == "done")
    failed = [j for j in jobs if j.status == "failed"]
    verdict.check("jobs created", total, len(jobs))
    note_restarts(verdict, "", run)
    verdict.check("jobs done or failed (none queued or running)", total, done + len(failed))
    verdict.note("jobs done", done)
    verdict.note("jobs failed", len(failed))
    verdict.check(
        "failed jobs with their reason", len(failed), sum(1 for j in failed if j.last_error)
    )
    for reason, count in Counter((j.last_error or "").split(":")[0] for j in failed).items():
        verdict.note(f"failed: {reason}", count)
    verdict.check(
        "episodes of done jobs (nothing lost)", done, table_counts(db_url, ["episodes"])["episodes"]
    )
    verdict.note("LLM calls", sum(calls.values()))
    verdict.note("transcripts retried at least once", sum(1 for c in calls.values() if c > 1))
    verdict.check("calls traced to a transcript", 0, calls.get("unknown", 0))
    most = max(calls.values(), default=0)
    verdict.check(f"most calls for one transcript <= {bound}", f"<= {bound}", most, most <= bound)
    most_attempts = max((j.attempts for j in failed), default=0)
    verdict.check(
        f"attempts of a failed job <= {bound}", f"<= {bound}", most_attempts, most_attempts <= bound
    )
    verdict.note("seconds", round(run.seconds, 1))
    return verdict.finish()


if __name__ == "__main__":
    raise SystemExit(main())
