"""Drill: Redis restarted mid-run, without persistence, loses no job.

A redis-server of the drill's own (port 6390, no RDB, no AOF, so a restart forgets every
queued message) is the broker. 300 transcripts (30 users x 10, offline extractor) go
through the fleet; at 30% of the jobs the server is shut down (`SHUTDOWN NOSAVE`), stays
down 3 s while the app keeps enqueueing, and comes back empty. The job rows in
PostgreSQL are the truth: beat's sweep republishes every job whose message was lost.
Expected: every job done, the memories of a clean run, nothing stored twice.

    python -m bench.drills.redis_restart [--port 6390]
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from bench.common import pg_database
from bench.drills.common import Verdict, drill_corpus, expected_active
from bench.drills.fleet_run import run_corpus
from bench.drills.kill_worker import checks
from bench.fleet import Fleet, job_counts


class RedisServer:
    """A redis-server process this drill owns (never the shared one on 6379)."""

    def __init__(self, port: int, workdir: Path) -> None:
        self.port = port
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = f"redis://127.0.0.1:{port}/0"

    def start(self) -> None:
        log = (self.workdir / "redis.log").open("ab")
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis(port=self.port, socket_timeout=1).ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def shutdown(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            # The server closes the connection as it exits.
            with contextlib.suppress(redis.ConnectionError):
                redis.Redis(port=self.port, socket_timeout=5).shutdown(nosave=True)
            self.proc.wait(timeout=10)
        self.proc = None

    def keys(self) -> int:
        return int(redis.Redis(port=self.port).dbsize())


def restarter(db_url: str, server: RedisServer, outage_s: float) -> Any:
    def damage(_fleet: Fleet, _: dict[str, int]) -> dict[str, Any]:
        keys = server.keys()
        queued = job_counts(db_url).get("queued", 0)
        server.shutdown()
        time.sleep(outage_s)
        server.start()
        return {"keys_lost": keys, "jobs_queued_at_restart": queued, "keys_after": server.keys()}

    return damage


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=6390)
    p.add_argument("--users", type=int, default=30)
    p.add_argument("--per-user", type=int, default=10)
    p.add_argument("--outage", type=float, default=3.0, help="seconds Redis stays down")
    args = p.parse_args(argv)
    db_url = pg_database("memlane_drill")
    corpus = drill_corpus(args.users, args.per_user)
    total = len(corpus)
    verdict = Verdict("redis_restart")
    with tempfile.TemporaryDirectory() as workdir:
        server = RedisServer(args.port, Path(workdir))
        server.start()
        try:
            clean = run_corpus(db_url, server.url, corpus, users=args.users, per_user=args.per_user)
            checks(verdict, "clean run", clean, total, args.users, args.per_user, db_url)
            hit = run_corpus(
                db_url,
                server.url,
                corpus,
                users=args.users,
                per_user=args.per_user,
                marks=[0.3],
                damage=restarter(db_url, server, args.outage),
            )
        finally:
            server.shutdown()
    for event in hit.events:
        verdict.note("redis restarted at", f"{event['at_share']:.0%} of jobs finished")
        verdict.note("messages and keys lost", event["keys_lost"])
        verdict.note("jobs queued at the restart", event["jobs_queued_at_restart"])
    verdict.note("enqueues that raised, nothing stored", len(hit.enqueue_errors))
    verdict.note("enqueues that raised, stored and queued", len(hit.enqueues_kept))
    if raised := hit.enqueue_errors + hit.enqueues_kept:
        verdict.note("first enqueue error", raised[0][:120])
    checks(verdict, "restart run", hit, total, args.users, args.per_user, db_url)
    verdict.check("restart run memories == clean run's", clean.state.active, hit.state.active)
    verdict.check(
        "expected active memories", expected_active(args.users, args.per_user), hit.state.active
    )
    return verdict.finish()


if __name__ == "__main__":
    raise SystemExit(main())
