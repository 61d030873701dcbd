"""What webhooks add to the write path: the time to record one store job's memory events
(10 events, one statement, as models/store/memories/events.py writes them) with no
subscription, with one that does not match the user, and with one that does (its
deliveries written in the same transaction).

    python -m bench.webhook_outbox [--rounds 300]

PostgreSQL, in a scratch database of its own (memlane_bench_webhooks).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, select

from bench.common import machine, pg_database
from memlane.models.db import session_factory, unit_of_work
from memlane.models.schemas import EventKind
from memlane.models.store.memories import events
from memlane.models.store.webhooks import outbox, subscriptions
from memlane.models.tables import WebhookRow
from memlane.models.webhook_schemas import WebhookCreate


def _time_batches(url: str, rounds: int) -> dict[str, float]:
    """Milliseconds per recorded batch (`total`), and of it the webhooks' part (the
    outbox's look at the subscriptions, and the deliveries when one matches), measured
    by recording the batch's deliveries once more in a transaction rolled back: p50 and
    p99 over `rounds` transactions."""
    totals, outboxes = [], []
    for _ in range(rounds):
        batch: list[tuple[str, EventKind, Mapping[str, Any] | None]] = [
            (f"mem_{uuid.uuid4().hex[:20]}", "created", {"job_id": "j"}) for _ in range(10)
        ]
        at = datetime.now(UTC)
        with unit_of_work(url) as session:
            started = time.perf_counter()
            events.record_many(session, user_id="team-a", actor="worker", at=at, events=batch)
            totals.append((time.perf_counter() - started) * 1000)
        session = session_factory(url)()
        try:
            session.execute(select(1))  # the transaction begun, as record_many finds it
            started = time.perf_counter()
            outbox.memory_events(session, user_id="team-a", actor="worker", at=at, events=batch)
            outboxes.append((time.perf_counter() - started) * 1000)
        finally:
            session.rollback()
            session.close()
    return {"total_" + k: v for k, v in _percentiles(totals).items()} | {
        "webhooks_" + k: v for k, v in _percentiles(outboxes).items()
    }


def _percentiles(samples: list[float]) -> dict[str, float]:
    samples = sorted(samples)
    return {
        "p50_ms": round(statistics.median(samples), 3),
        "p99_ms": round(samples[int(len(samples) * 0.99) - 1], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    url = pg_database("memlane_bench_webhooks", fresh=True)
    figures: dict[str, dict[str, float]] = {}
    for case, users in (
        ("no_subscription", None),
        ("other_users", "solo-*"),
        ("matching", "team-*"),
    ):
        with unit_of_work(url) as session:
            session.execute(delete(WebhookRow))
            if users is not None:
                hook = WebhookCreate(
                    url="https://x.example/h", events=["memory.created"], users=users
                )
                subscriptions.add(session, webhook=hook, now=datetime.now(UTC))
        _time_batches(url, 20)  # warm: connections, prepared statements
        figures[case] = _time_batches(url, args.rounds)
        print(f"{case}: {figures[case]}")
    print(json.dumps({"machine": machine(), "record_10_memory_events": figures}))


if __name__ == "__main__":
    main()
