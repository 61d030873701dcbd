"""Drill: Redis killed ten times under in-flight acks; no worker exits.

A redis-server of the drill's own (a free port, no RDB, no AOF) is the broker of the
Procfile's fleet: the `extract` worker on the thread pool, the `store` worker on prefork,
and beat. 200 transcripts (20 users x 10, offline extractor, so jobs are short and acks
constant) go through it; at 5%, 15%, … 95% of the jobs, once a job is running, the server
is SIGKILLed, stays down `--outage` seconds and comes back empty. A worker that exits is
started again (as a supervisor would) and counted: the check is that none exits, since a
queue without a consumer waits for someone to act. The job rows are the truth: beat's
sweep republishes what the dead server forgot. Expected: no worker exited, every job
done, nothing stored twice.

    python -m bench.drills.broker_outage [--kills 10 --outage 1]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import pg_database
from bench.drills.common import Verdict, drill_corpus
from bench.drills.fleet_run import run_corpus
from bench.drills.redis_restart import RedisServer
from bench.fleet import Fleet, job_counts
from tests.llm_stub import LLMStub


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def killer(db_url: str, server: RedisServer, outage_s: float, settle_s: float) -> Any:
    def damage(fleet: Fleet, _: dict[str, int]) -> dict[str, Any]:
        # Jobs are short: wait (briefly) for one to run, so acks are in flight at the kill.
        deadline = time.monotonic() + 10
        while (running := job_counts(db_url).get("running", 0)) == 0:
            if time.monotonic() > deadline:
                break
            time.sleep(0.005)
        before = {role: worker.proc.pid for role, worker in fleet.workers.items()}
        assert server.proc is not None
        os.kill(server.proc.pid, signal.SIGKILL)
        server.proc.wait(timeout=10)
        server.proc = None
        time.sleep(outage_s)
        server.start()
        # A worker that gives up does so while reconnecting: give it the time to.
        time.sleep(settle_s)
        exited = sorted(
            role
            for role, worker in fleet.workers.items()
            if worker.proc.pid == before[role] and worker.proc.poll() is not None
        )
        why = {
            role: _last_error(fleet.workers[role].log_path.read_text(errors="replace"))
            for role in exited
        }
        return {"jobs_running_at_kill": running, "exited": exited, "why": why}

    return damage


def _last_error(log: str) -> str:
    """The line that says why a worker exited: Celery's last error or critical line."""
    lines = [line for line in log.splitlines() if "ERROR" in line or "CRITICAL" in line]
    return lines[-1].split("] ", 1)[-1][:300] if lines else log[-300:]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=0, help="the drill's Redis (default: a free one)")
    p.add_argument("--users", type=int, default=60)
    p.add_argument("--per-user", type=int, default=10)
    p.add_argument("--kills", type=int, default=10)
    p.add_argument("--outage", type=float, default=1.0, help="seconds Redis stays down")
    p.add_argument("--llm-delay", type=float, default=3.0, help="seconds each LLM answer takes")
    p.add_argument(
        "--extract-concurrency", type=int, default=32, help="the Procfile's default: 32 threads"
    )
    p.add_argument("--settle", type=float, default=3.0, help="seconds watched after each")
    args = p.parse_args(argv)
    db_url = pg_database("memlane_drill_broker")
    corpus = drill_corpus(args.users, args.per_user)
    total = len(corpus)
    marks = [(k + 0.5) / args.kills for k in range(args.kills)]
    verdict = Verdict("broker_outage")
    with tempfile.TemporaryDirectory() as workdir:
        server = RedisServer(args.port or free_port(), Path(workdir))
        server.start()
        try:
            with LLMStub(delay_s=args.llm_delay) as stub:
                stub.answer(memories=[])
                run = run_corpus(
                    db_url,
                    server.url,
                    corpus,
                    users=args.users,
                    per_user=args.per_user,
                    marks=marks,
                    damage=killer(db_url, server, args.outage, args.settle),
                    extract_concurrency=args.extract_concurrency,
                    llm_model="openai/stub-model",
                    llm_api_base=stub.base_url,
                    llm_api_key="x",
                )
        finally:
            server.shutdown()
    verdict.note("redis SIGKILLed, times", len(run.events))
    verdict.note("outage (s)", args.outage)
    verdict.note(
        "jobs running at each kill", [event["jobs_running_at_kill"] for event in run.events]
    )
    verdict.note("enqueues that raised, nothing stored", len(run.enqueue_errors))
    # BrokerUnavailableError: the transcript is stored and the sweep publishes its jobs
    verdict.note("enqueues that raised, stored and queued", len(run.enqueues_kept))
    verdict.note(
        "kills after which a worker exited within the settle time",
        sum(1 for e in run.events if e["exited"]),
    )
    for event in run.events:
        for role, why in event["why"].items():
            verdict.note(f"{role} exited at {event['at_share']:.0%}", why)
    # every exit, however late: the run's supervisor started each exited worker again
    verdict.check("workers that exited", 0, len(run.restarts))
    verdict.check("extract worker exits", 0, sum(r.startswith("extract") for r in run.restarts))
    verdict.check("store worker exits", 0, sum(r.startswith("store") for r in run.restarts))
    for restart in run.restarts:
        verdict.note("exited", restart)
    stored = total - len(run.enqueue_errors)
    verdict.check("jobs done", stored, run.counts.get("done", 0))
    verdict.check("jobs not done", 0, sum(run.counts.values()) - run.counts.get("done", 0))
    verdict.check("memories stored twice", 0, run.state.duplicates)
    verdict.note("run took (s)", round(run.seconds, 1))
    return verdict.finish()


if __name__ == "__main__":
    raise SystemExit(main())
