"""HTTP traffic for the drills that drive the API: what each request got back (status,
error code, latency, when), from threads that each hold one connection, as an app's
workers do."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

QUERIES = (
    "what stack does the user prefer?",
    "where does the user live?",
    "which toolkit for which work?",
    "what did we decide?",
)


@dataclass(frozen=True)
class Outcome:
    route: str
    status: int  # 0: no answer (connection refused, reset, timeout)
    code: str | None  # the error's code, or the transport error's class
    seconds: float
    at: float  # time.monotonic() when the request started


@dataclass
class Log:
    """Outcomes of every thread, appended under a lock."""

    outcomes: list[Outcome] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, outcome: Outcome) -> None:
        with self.lock:
            self.outcomes.append(outcome)

    def __len__(self) -> int:
        return len(self.outcomes)

    def by_answer(self) -> Counter[str]:
        return Counter(f"{o.route} {o.status} {o.code or ''}".rstrip() for o in self.outcomes)


def send(http: httpx.Client, route: str, body: dict[str, Any], log: Log) -> Outcome:
    started, at = time.perf_counter(), time.monotonic()
    try:
        answer = http.post(route, json=body)
    except httpx.TransportError as exc:
        outcome = Outcome(route, 0, type(exc).__name__, time.perf_counter() - started, at)
    else:
        code = None
        if answer.status_code >= 400:
            try:
                code = str(answer.json()["error"]["code"])
            except (ValueError, KeyError, TypeError):
                code = "no error code"
        outcome = Outcome(route, answer.status_code, code, time.perf_counter() - started, at)
    log.add(outcome)
    return outcome


def context_body(rng: random.Random, users: list[str], budget: int = 1000) -> dict[str, Any]:
    return {"user_id": rng.choice(users), "query": rng.choice(QUERIES), "budget_tokens": budget}


def enqueue_until_accepted(
    http: httpx.Client, transcript: dict[str, Any], log: Log, *, give_up_s: float = 120.0
) -> Outcome:
    """POST a transcript; on a 503 (the server stored nothing, or stored it and queued its
    jobs) or no answer, send it again after a pause, as a client should."""
    deadline = time.monotonic() + give_up_s
    while True:
        outcome = send(http, "/v1/transcripts", transcript, log)
        if outcome.status not in (0, 503) or time.monotonic() > deadline:
            return outcome
        time.sleep(0.2)


def loop(stop: threading.Event, step: Callable[[], object]) -> threading.Thread:
    """Run `step` over and over on a thread of its own until `stop` is set."""

    def run() -> None:
        while not stop.is_set():
            step()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread
