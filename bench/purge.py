"""What one purge costs now that it takes the fact out of what was derived from it
(models/store/memories/scrub.py): `Memlane.purge` of a memory of a user with N episodes
and N context packs, every one read under the user's lock (the episodes redacted where
they quote the fact and embedded again, the packs' queries screened), on PostgreSQL and
SQLite, hashing embedder. Five episodes and one pack quote each purged memory.

    python -m bench.purge               # users of 1k and 10k episodes and packs
    python -m bench.purge --size tiny   # seconds: proves it runs
"""

from __future__ import annotations

import random
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import func, insert, select

from bench.common import Report, latency_summary, parser, pg_database, sqlite_database, truncate
from memlane.config.settings import load_settings
from memlane.models.db import unit_of_work
from memlane.models.tables import ContextPackRow, EpisodeRow
from memlane.pipeline.dedup.redaction import MARKER
from memlane.service.facade import Memlane

PLANS: dict[str, dict[str, Any]] = {
    "tiny": {"sizes": [100], "purges": 3, "db": "memlane_bench_purge_tiny"},
    "full": {"sizes": [1000, 10_000], "purges": 10, "db": "memlane_bench_purge"},
}
USER = "bench-purge"
VOCABULARY = [f"word{i}" for i in range(2_000)]


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.sample(VOCABULARY, 8)).capitalize() + "."


def fill(url: str, size: int, purges: int) -> None:
    """`size` episodes and packs of unrelated words, then for each memory to purge five
    episodes and one pack that quote it."""
    rng = random.Random(7)
    now = datetime.now(UTC)
    episodes: list[dict[str, Any]] = []
    packs: list[dict[str, Any]] = []
    for i in range(size):
        quoted = i // 5 if i < 5 * purges else None
        fact = f" I have a pet axolotl{quoted} named Quetzal{quoted}." if quoted is not None else ""
        episodes.append(
            {
                "id": f"ep_bench{i:08d}",
                "user_id": USER,
                "conversation_id": f"c{i // 10}",
                "summary": f"{_sentence(rng)} {_sentence(rng)}{fact}",
                "topics": rng.sample(VOCABULARY, 3),
                "outcome": _sentence(rng),
                "created_at": now,
                "ref": 1_000_000 + i,
                "change_seq": 0,
            }
        )
        query = f"axolotl{i} Quetzal{i}" if i < purges else _sentence(rng)
        body = {"query": query, "items": [{"id": f"ep_bench{i:08d}", "section": "episode"}]}
        packs.append({"id": f"pack_bench{i:08d}", "user_id": USER, "assembled_at": now,
                      "body": body})  # fmt: skip
    with unit_of_work(url) as session:
        session.execute(insert(EpisodeRow), episodes)
        session.execute(insert(ContextPackRow), packs)


def run(report: Report, backend: str, url: str, size: int, purges: int) -> None:
    truncate(url)
    fill(url, size, purges)
    settings = load_settings(database_url=url, embedding_model="hashing")
    with Memlane(settings) as lane:
        ids = [
            lane.add_memory(
                USER, {"content": f"User has a pet axolotl{i} named Quetzal{i} from lake{i}."}
            ).id
            for i in range(purges)
        ]
        durations = []
        for memory_id in ids:
            started = time.perf_counter()
            lane.purge(USER, memory_id)
            durations.append(time.perf_counter() - started)
    summary = latency_summary(durations)
    with unit_of_work(url) as session:  # what the purges took out, as a check
        redacted = session.scalar(select(func.count()).where(EpisodeRow.summary.contains(MARKER)))
        packs_left = session.scalar(select(func.count()).select_from(ContextPackRow))
    report.emit(backend=backend, episodes=size, packs=size, purges=purges,
                p50_ms=summary["p50_ms"], max_ms=summary["max_ms"],
                episodes_redacted=redacted, packs_deleted=size - int(packs_left or 0))  # fmt: skip


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    plan = PLANS[args.size]
    columns = ["backend", "episodes", "purges", "p50_ms", "max_ms", "episodes_redacted",
               "packs_deleted"]  # fmt: skip
    report = Report("purge", columns)
    pg = pg_database(plan["db"])
    with tempfile.TemporaryDirectory() as scratch:
        sqlite = sqlite_database(Path(scratch) / "purge.db")
        for size in plan["sizes"]:
            run(report, "postgresql", pg, size, plan["purges"])
            run(report, "sqlite", sqlite, size, plan["purges"])
    report.print_table()


if __name__ == "__main__":
    main()
