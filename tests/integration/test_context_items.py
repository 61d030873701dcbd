"""The assembler's one read of soul blocks, episodes and procedures."""

from __future__ import annotations

from datetime import datetime, timedelta

from memlane.models.db import unit_of_work
from memlane.models.store.users import context_items
from memlane.pipeline.records import ExtractedEpisode


def test_one_read_gives_what_the_three_reads_give(db_url: str, now: datetime) -> None:
    with unit_of_work(db_url) as s:
        context_items.set_soul_block(s, user_id="u1", kind="style", content="Terse.", now=now)
        context_items.set_soul_block(s, user_id="u1", kind="identity", content="Alma.", now=now)
        context_items.set_soul_block(s, user_id="u2", kind="identity", content="Other.", now=now)
        for n in range(14):
            context_items.save_episode(
                s,
                user_id="u1" if n < 12 else "u2",
                conversation_id=f"c{n}",
                job_id=f"job_{n}",
                episode=ExtractedEpisode(
                    summary=f"Talked about {n}.", topics=["auth", str(n)], outcome=None
                ),
                created_at=now - timedelta(hours=n % 5),
            )
        for name in ("Deploy", "Billing"):
            context_items.add_procedure(
                s,
                user_id="u1",
                name=name,
                content=f"{name} steps.",
                keywords={name.lower()},
                now=now,
            )
        context_items.add_procedure(
            s, user_id="u2", name="Other", content="No.", keywords={"deploy"}, now=now
        )
    with unit_of_work(db_url) as s:
        got = context_items.context_items(s, "u1", episode_limit=10)
        souls = context_items.soul_blocks(s, "u1")
        episodes = context_items.recent_episodes(s, "u1", limit=10)
        procedures = context_items.procedures(s, "u1")
        nothing = context_items.context_items(s, "nobody")
    assert [b.kind for b in got.soul_blocks] == ["identity", "style"]
    assert sorted(got.soul_blocks, key=lambda b: b.kind) == sorted(souls, key=lambda b: b.kind)
    assert got.episodes == episodes and len(episodes) == 10
    assert got.procedures == procedures and len(procedures) == 2
    assert nothing == context_items.ContextItems([], [], [])
