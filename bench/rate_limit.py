"""Per-key rate limits across two API processes: a burst of concurrent requests with one
key, alternating between two uvicorn processes that count in the same Redis, then a
steady stream at twice the key's rate. Prints how many passed, the 429 rate, the
Retry-After the refused were told, and at most how many the limit lets through (burst +
rate x elapsed): the processes share one budget, so the passes match one key's limit,
not two.

    python -m bench.rate_limit                   # rate 20/s, burst 40: 400 at once, 10 s steady
    python -m bench.rate_limit --size tiny

The API runs on a SQLite file (the key check reads its key once per 5 s per process);
Redis is MEMLANE_BENCH_REDIS_URL (only the key's bucket is touched).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import redis

from bench.common import REDIS_URL, Report, env_for_children, parser
from bench.drills.api_server import api_server
from memlane.models import migrate
from memlane.service.keys.keyring import Keyring
from memlane.service.keys.rate_limit import PREFIX

PLANS: dict[str, dict[str, float]] = {
    "tiny": {"rate": 10, "burst": 10, "requests": 60, "steady_s": 2},
    "full": {"rate": 20, "burst": 40, "requests": 400, "steady_s": 10},
}
CONCURRENCY = 32


async def burst(urls: list[str], key: str, n: int) -> tuple[list[httpx.Response], float]:
    """`n` requests at once (CONCURRENCY in flight), alternating between the `urls`."""
    headers = {"Authorization": f"Bearer {key}"}
    gate = asyncio.Semaphore(CONCURRENCY)
    async with httpx.AsyncClient(timeout=30, headers=headers) as http:

        async def one(i: int) -> httpx.Response:
            async with gate:
                return await http.get(f"{urls[i % len(urls)]}/v1/users/bench:1/memories")

        started = time.perf_counter()
        answers = await asyncio.gather(*(one(i) for i in range(n)))
    return list(answers), time.perf_counter() - started


async def steady(
    urls: list[str], key: str, per_s: float, seconds: float
) -> tuple[list[httpx.Response], float]:
    """One request each 1/`per_s` s for `seconds`, alternating between the `urls`."""
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(timeout=30, headers=headers) as http:
        tasks: list[asyncio.Task[httpx.Response]] = []
        started = time.perf_counter()
        i = 0
        while (now := time.perf_counter() - started) < seconds:
            url = f"{urls[i % len(urls)]}/v1/users/bench:1/memories"
            tasks.append(asyncio.create_task(http.get(url)))
            i += 1
            await asyncio.sleep(max(0.0, i / per_s - now))
        answers = await asyncio.gather(*tasks)
    return list(answers), time.perf_counter() - started


def figures(
    phase: str,
    answers: list[httpx.Response],
    elapsed: float,
    urls: list[str],
    plan: dict[str, float],
) -> dict[str, Any]:
    passed = [a for a in answers if a.status_code == 200]
    refused = [a for a in answers if a.status_code == 429]
    other = len(answers) - len(passed) - len(refused)
    if other:
        raise RuntimeError(f"{other} answers neither 200 nor 429: {answers[0].text[:300]}")
    headers = [int(a.headers["retry-after"]) for a in refused]
    told = [float(a.json()["error"]["retry_after"]) for a in refused]
    by_process = [sum(1 for a in passed if str(a.request.url).startswith(u)) for u in urls]
    return {
        "phase": phase,
        "requests": len(answers),
        "passed": len(passed),
        "rate_limited": len(refused),
        "rate_429": round(len(refused) / len(answers), 3),
        "limit_allows": round(plan["burst"] + plan["rate"] * elapsed),
        "passed_by_process": by_process,
        "retry_after_header_s": [min(headers), max(headers)] if headers else None,
        "retry_after_median_s": round(statistics.median(told), 3) if told else None,
        "elapsed_s": round(elapsed, 2),
        "rate_per_s": plan["rate"],
        "burst": plan["burst"],
    }


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    args = p.parse_args(argv)
    plan = PLANS[args.size]
    report = Report(
        "rate_limit",
        ["phase", "requests", "passed", "limit_allows", "rate_429", "retry_after_median_s"],
    )
    with tempfile.TemporaryDirectory() as scratch:
        url = f"sqlite:///{Path(scratch) / 'rate.db'}"
        migrate.upgrade(url)
        made = Keyring(url).create("bench", rate_per_s=plan["rate"], burst=int(plan["burst"]))
        bucket = PREFIX + made.info.id
        env = env_for_children(
            MEMLANE_DATABASE_URL=url,
            MEMLANE_RATE_LIMIT_REDIS_URL=REDIS_URL,
            MEMLANE_EMBEDDING_MODEL="hashing",
        )
        logs = Path(scratch)
        with api_server(env, logs) as first, api_server(env, logs) as second:
            urls = [first.url, second.url]
            client = redis.Redis.from_url(REDIS_URL)
            client.delete(bucket)
            answers, elapsed = asyncio.run(burst(urls, made.key, int(plan["requests"])))
            report.emit(**figures("burst", answers, elapsed, urls, plan))
            client.delete(bucket)
            answers, elapsed = asyncio.run(
                steady(urls, made.key, plan["rate"] * 2, plan["steady_s"])
            )
            report.emit(**figures("steady_2x_rate", answers, elapsed, urls, plan))
            client.delete(bucket)
    report.print_table()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
