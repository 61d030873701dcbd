"""Drill: PostgreSQL restarted during ingestion and assemblies. While it is down the
API answers 503 with a code (never a 500, never no answer), then recovers without a
restart of memlane; the workers retry; every transcript ends done; nothing is stored
twice.

The API (uvicorn, its own process) and a fleet (extract + store workers, beat) run on the
drill database; two threads POST the drill corpus to /v1/transcripts (a 503 or no answer
is sent again, as a client should) while two others POST /v1/context for random users
without pause. Once `--at` of the transcripts are accepted, `--restart-command` runs (default
`pg_ctlcluster --skip-systemctl-redirect 15 main restart`: it restarts the whole server,
so every other user of it sees a few seconds of failures too). The command is any shell
line: `tests/integration/test_drill_smoke.py` passes one that only terminates the drill
database's connections.

    python -m bench.drills.pg_restart [--users 10 --per-user 6 --at 0.3]
"""

from __future__ import annotations

import argparse
import functools
import random
import shlex
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from bench.common import REDIS_URL, flush_redis, pg_database, truncate
from bench.drills.api_server import api_server
from bench.drills.common import Verdict, drill_corpus, expected_active, store_state
from bench.drills.fleet_run import DRILL_SETTINGS
from bench.drills.traffic import Log, Outcome, context_body, enqueue_until_accepted, loop, send
from bench.fleet import running_fleet, wait_all_finished

DEFAULT_RESTART = "pg_ctlcluster --skip-systemctl-redirect 15 main restart"
# What a 503 may say while the database is away (the API's codes for "try again").
RETRY_CODES = {"database_unavailable", "broker_unavailable", "not_ready"}
FIVE_XX = set(range(500, 600)) - {503}


def feed(http: httpx.Client, lane: list[dict[str, Any]], log: Log, pace: float) -> list[Outcome]:
    sent = []
    for transcript in lane:
        sent.append(enqueue_until_accepted(http, transcript, log))
        time.sleep(pace)
    return sent


def accepted_count(log: Log) -> int:
    with log.lock:
        return sum(1 for o in log.outcomes if o.status == 202)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--restart-command", default=DEFAULT_RESTART)
    p.add_argument("--users", type=int, default=10)
    p.add_argument("--per-user", type=int, default=6)
    p.add_argument("--at", type=float, default=0.4, help="share of transcripts sent first")
    p.add_argument("--pace", type=float, default=0.1, help="seconds between a feeder's sends")
    p.add_argument("--settle", type=float, default=5.0, help="seconds of traffic after it")
    args = p.parse_args(argv)
    db_url = pg_database("memlane_drill")
    truncate(db_url)
    flush_redis(REDIS_URL)
    corpus = drill_corpus(args.users, args.per_user, prefix="pgr-user")
    users = sorted({item["user_id"] for item in corpus})
    verdict = Verdict("pg_restart")
    log, stop = Log(), threading.Event()
    with (
        tempfile.TemporaryDirectory() as logs,
        running_fleet(db_url, REDIS_URL, Path(logs), settings=DRILL_SETTINGS, beat=True) as fleet,
        api_server(fleet.env, Path(logs)) as api,
    ):
        clients = [httpx.Client(base_url=api.url, timeout=30) for _ in range(4)]
        rngs = [random.Random(n) for n in range(2)]

        def assemble(n: int) -> object:
            return send(clients[n], "/v1/context", context_body(rngs[n], users), log)

        assemblers = [loop(stop, functools.partial(assemble, n)) for n in range(2)]
        with ThreadPoolExecutor(2) as pool:
            lanes = [corpus[0::2], corpus[1::2]]
            feeding = [
                pool.submit(feed, clients[2 + n], lane, log, args.pace)
                for n, lane in enumerate(lanes)
            ]
            while accepted_count(log) < args.at * len(corpus) and not feeding[0].done():
                time.sleep(0.02)
            restart_at = time.monotonic()
            restarted = subprocess.run(
                shlex.split(args.restart_command), capture_output=True, text=True, timeout=120
            )
            restart_s = time.monotonic() - restart_at
            accepted = [o for future in feeding for o in future.result()]
        time.sleep(args.settle)
        counts = wait_all_finished(db_url, len(corpus), timeout=600)
        stop.set()
        for thread in assemblers:
            thread.join(timeout=60)
        after = send(clients[0], "/v1/context", context_body(rngs[0], users), log)
        api_alive = api.proc.poll() is None
        for http in clients:
            http.close()
    verdict.note("restart command", args.restart_command)
    verdict.check("restart command exit code", 0, restarted.returncode)
    if restarted.returncode:
        verdict.note("restart command said", (restarted.stderr or restarted.stdout)[-200:])
    verdict.note("restart took (s)", round(restart_s, 2))
    outcomes = log.outcomes
    failing = [o for o in outcomes if o.status >= 500 or o.status == 0]
    after_restart = [o for o in failing if o.at >= restart_at - 1]
    if after_restart:
        window = max(o.at + o.seconds for o in after_restart) - restart_at
        verdict.note("answers not 2xx from the restart on, for (s)", round(window, 2))
    for answer, count in sorted(log.by_answer().items()):
        verdict.note(f"answers: {answer}", count)
    verdict.check("requests sent", ">= corpus", len(outcomes), len(outcomes) >= len(corpus))
    verdict.check(
        "HTTP 5xx answers other than 503", 0, sum(1 for o in outcomes if o.status in FIVE_XX)
    )
    verdict.check("requests with no answer", 0, sum(1 for o in outcomes if o.status == 0))
    verdict.check(
        "503s with a retry code",
        sum(1 for o in outcomes if o.status == 503),
        sum(1 for o in outcomes if o.status == 503 and o.code in RETRY_CODES),
    )
    verdict.check("transcripts accepted (202)", len(corpus), sum(o.status == 202 for o in accepted))
    verdict.check("API process still the same one", True, api_alive)
    verdict.check("a context after the restart", 200, after.status)
    verdict.check("jobs done", len(corpus), counts.get("done", 0))
    verdict.check("jobs failed", 0, counts.get("failed", 0))
    state = store_state(db_url, args.users, args.per_user, prefix="pgr-user")
    verdict.check("active memories", expected_active(args.users, args.per_user), state.active)
    verdict.check("memories stored twice", 0, state.duplicates)
    verdict.check("signatures confirmed per transcript", args.users, state.signatures_confirmed)
    return verdict.finish()


if __name__ == "__main__":
    raise SystemExit(main())
