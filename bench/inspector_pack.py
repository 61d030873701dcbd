"""The inspector's pack page (`GET /ui/packs/{id}`, memlane.api.ui) for a pack of 10k
candidates: every memory of a 10k-memory user a row, as the pack of a large user's
exhaustive assembly holds them. Timed through the ASGI app, signed in, as the browser
waits for it (the store read of the texts, the fates, the template), on PostgreSQL and
SQLite; also with a "where is?" search. The goal: under a second.

    python -m bench.inspector_pack
    python -m bench.inspector_pack --size tiny
"""

from __future__ import annotations

import json
import os
import random
import re
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select

from bench import dataset
from bench.common import (
    Report,
    latency_summary,
    parser,
    pg_database,
    sqlite_database,
    time_calls,
)
from memlane.api.app import create_app
from memlane.config.settings import load_settings
from memlane.models.db import unit_of_work
from memlane.models.store.users import packs
from memlane.models.tables import MemoryRow
from memlane.service.facade import Memlane

PLANS: dict[str, dict[str, Any]] = {
    # databases of their own: the page reads no vector, so the user is loaded with the
    # hashing embedder whatever MEMLANE_EMBEDDING_MODEL says (bench.assemble's databases
    # hold another embedder's vectors)
    "tiny": {"size": 200, "iterations": 3, "db": "memlane_bench_inspector_tiny"},
    "full": {"size": 10_000, "iterations": 20, "db": "memlane_bench_inspector"},
}
KEY = "bench-inspector-key"
GOAL_MS = 1000.0
REASONS = ("over_budget", "over_budget", "over_budget", "over_memory_share", "sensitive")


def pack_of_everything(url: str, user_id: str) -> str:
    """A stored pack holding every memory of the user as a candidate: the 40 best
    included, the rest dropped for a reason; its id."""
    rng = random.Random(7)
    with unit_of_work(url) as session:
        rows = session.execute(
            select(MemoryRow.id, MemoryRow.ref, MemoryRow.tier).where(MemoryRow.user_id == user_id)
        ).all()
    items: list[dict[str, Any]] = []
    for rank, (memory_id, ref, tier) in enumerate(rows):
        relevance = rng.random()
        included = rank < 40
        items.append(
            {
                "id": memory_id,
                "ref": ref,
                "section": "memory",
                "tier": tier,
                "score": relevance * 0.6,
                "components": {
                    "relevance": relevance,
                    "importance": 0.5,
                    "recency": 0.5,
                    "frequency": 0.1,
                    "composite": relevance * 0.6,
                },
                "tokens": rng.randint(12, 60),
                "included": included,
                "drop_reason": None if included else rng.choice(REASONS),
            }
        )
    pack_id = f"pack_bench_{len(items)}"
    at = dataset.NOW - timedelta(minutes=5)
    body = {
        "pack_id": pack_id,
        "user_id": user_id,
        "query": "what stack does the user prefer?",
        "assembled_at": at.isoformat(),
        "strategy": "scored",
        "budget_tokens": 4000,
        "used_tokens": 3950,
        "items": items,
        "dropped_count": len(items) - 40,
        "drop_reasons": {},
        "events": [],
        "retrieval_mode": "working-set",
        "style": "default",
    }
    with unit_of_work(url) as session:
        packs.save_packs(session, [(pack_id, user_id, at, json.dumps(body))], now=at)
    return pack_id


def signed_in(client: TestClient) -> None:
    form = client.get("/ui/signin")
    token = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert token is not None
    done = client.post("/ui/signin", data={"key": KEY, "csrf": token[1]})
    assert done.status_code == 303, done.text


def bench_backend(report: Report, backend: str, url: str, plan: dict[str, Any]) -> None:
    user_id = dataset.ensure_user(url, plan["size"])
    pack_id = pack_of_everything(url, user_id)
    settings = load_settings(database_url=url, api_keys=[KEY])
    with Memlane(settings) as lane, TestClient(create_app(lane), follow_redirects=False) as client:
        signed_in(client)
        for search, path in (
            ("", f"/ui/packs/{pack_id}"),
            ("where is", f"/ui/packs/{pack_id}?where=typescript"),
        ):
            sizes: list[int] = []

            def call(_: int, path: str = path, sizes: list[int] = sizes) -> None:
                answer = client.get(path)
                assert answer.status_code == 200, answer.text[:500]
                sizes.append(len(answer.content))

            seconds = time_calls(call, warmup=1, iterations=plan["iterations"], max_seconds=60)
            summary = latency_summary(seconds)
            report.emit(
                backend=backend,
                candidates=plan["size"],
                page=search or "pack",
                html_kib=round(sizes[-1] / 1024, 1),
                goal_ms=GOAL_MS,
                met=summary["p50_ms"] < GOAL_MS,
                **summary,
            )


def main(argv: list[str] | None = None) -> int:
    os.environ["MEMLANE_EMBEDDING_MODEL"] = "hashing"  # see PLANS
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--backend", nargs="+", default=["postgresql", "sqlite"])
    args = p.parse_args(argv)
    plan = PLANS[args.size]
    report = Report(
        "inspector_pack",
        ["backend", "candidates", "page", "n", "p50_ms", "p99_ms", "html_kib", "met"],
    )
    for backend in args.backend:
        if backend == "postgresql":
            url = pg_database(plan["db"])
        else:
            url = sqlite_database(Path(tempfile.gettempdir()) / f"{plan['db']}.sqlite")
        bench_backend(report, backend, url, plan)
    report.print_table()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
