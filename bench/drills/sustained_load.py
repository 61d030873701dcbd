"""Drill: sustained load. 8 clients on 127.0.0.1 send a bounded number of requests to
the API (4 of 5 POST /v1/context, 1 of 5 POST /v1/transcripts) as fast as it answers:
0 errors, p50 / p99 per route and requests per second, and the resident memory of the
API and of the workers grows at most 5% between request 2,000 and request 10,000.

The API (uvicorn, one process) and a fleet (extract + store workers) run on the drill
database. Each of `--users` users (fewer than any cache holds) is seeded with two
transcripts first; the load's transcripts are new conversations that say again what
earlier ones said (each user cycles through three), so the workers extract, dedup and
confirm all along while the store, and with it the working sets, stays the same size:
memory that grows is memory that leaks.

    python -m bench.drills.sustained_load [--requests 10000 --baseline 2000 --clients 8]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import REDIS_URL, flush_redis, latency_summary, pg_database, truncate
from bench.drills.api_server import api_server, rss_kib
from bench.drills.common import Verdict, drill_transcript
from bench.drills.fleet_run import DRILL_SETTINGS
from bench.drills.traffic import Log, context_body, send
from bench.fleet import Fleet, cpu_seconds, running_fleet, wait_all_finished

CYCLE = 3  # transcripts per user the load repeats


def fleet_rss(fleet: Fleet) -> int:
    return sum(rss_kib(worker.proc.pid) for worker in fleet.workers.values())


class Load:
    """Numbered requests shared by the clients; samples memory when request `baseline`
    and the last one are handed out."""

    def __init__(self, total: int, baseline: int, sample: Any) -> None:
        self.total, self.baseline, self.sample = total, baseline, sample
        self.next = 0
        self.lock = threading.Lock()
        self.samples: dict[str, dict[str, int]] = {}

    def take(self) -> int | None:
        with self.lock:
            if self.next >= self.total:
                return None
            self.next += 1
            number = self.next
            if number in (self.baseline, self.total):
                self.samples["baseline" if number == self.baseline else "end"] = self.sample()
            return number


def client(api_url: str, load: Load, log: Log, users: list[str], seed: int) -> None:
    rng = random.Random(seed)
    with httpx.Client(base_url=api_url, timeout=30) as http:
        while (number := load.take()) is not None:
            if number % 5 == 0:
                user = rng.choice(users)
                body = drill_transcript(user, rng.randrange(CYCLE))
                body["conversation_id"] = f"{user}-load{number}"
                send(http, "/v1/transcripts", body, log)
            else:
                send(http, "/v1/context", context_body(rng, users), log)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=10_000)
    p.add_argument("--baseline", type=int, default=2_000, help="request where memory is read")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--users", type=int, default=20)
    p.add_argument("--max-growth", type=float, default=0.05)
    args = p.parse_args(argv)
    db_url = pg_database("memlane_drill")
    truncate(db_url)
    flush_redis(REDIS_URL)
    users = [f"load-user{n}" for n in range(args.users)]
    verdict = Verdict("sustained_load")
    log = Log()
    with (
        tempfile.TemporaryDirectory() as logs,
        running_fleet(db_url, REDIS_URL, Path(logs), settings=DRILL_SETTINGS) as fleet,
        api_server(fleet.env, Path(logs)) as api,
    ):
        with httpx.Client(base_url=api.url, timeout=30) as http:
            for user in users:
                for number in range(2):
                    send(http, "/v1/transcripts", drill_transcript(user, number), Log())
        wait_all_finished(db_url, 2 * len(users), timeout=600)

        def sample() -> dict[str, int]:
            return {"api": rss_kib(api.proc.pid), "workers": fleet_rss(fleet)}

        load = Load(args.requests, args.baseline, sample)
        api_cpu = cpu_seconds([api.proc.pid])
        started = time.perf_counter()
        threads = [
            threading.Thread(target=client, args=(api.url, load, log, users, n))
            for n in range(args.clients)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        seconds = time.perf_counter() - started
        api_cpu = cpu_seconds([api.proc.pid]) - api_cpu
    outcomes = log.outcomes
    errors = [o for o in outcomes if not 200 <= o.status < 300]
    verdict.check("requests answered", args.requests, len(outcomes))
    verdict.check("errors (not 2xx)", 0, len(errors))
    for answer, count in sorted(log.by_answer().items()):
        verdict.note(f"answers: {answer}", count)
    verdict.note("requests/s", round(len(outcomes) / seconds, 1))
    verdict.note("API CPU ms per request", round(1000 * api_cpu / max(1, len(outcomes)), 2))
    for route in ("/v1/context", "/v1/transcripts"):
        summary = latency_summary([o.seconds for o in outcomes if o.route == route])
        verdict.note(f"{route} p50 / p99 ms", f"{summary['p50_ms']} / {summary['p99_ms']}")
    base, end = load.samples.get("baseline", {}), load.samples.get("end", {})
    for role in ("api", "workers"):
        if role not in base or role not in end:
            verdict.check(f"{role} memory sampled", True, False)
            continue
        growth = (end[role] - base[role]) / base[role]
        figure = f"{base[role] / 1024:.1f} -> {end[role] / 1024:.1f} MiB ({growth:+.1%})"
        limit = f"<= {args.max_growth:.0%}"
        verdict.check(
            f"{role} RSS, request {args.baseline:,} -> {args.requests:,}",
            limit,
            figure,
            growth <= args.max_growth,
        )
    return verdict.finish()


if __name__ == "__main__":
    raise SystemExit(main())
