"""`memlane search`: a user's memories for a query with their scores (the assembler's
ranking, no budget, no XML)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import typer
from rich import box
from rich.table import Table

from memlane.cli.common import (
    Agent,
    AsJson,
    FilterOption,
    lane_session,
    print_json,
    shown,
    stdout,
)
from memlane.pipeline.records import Tier


def search(
    user: Annotated[str, typer.Option("--user", help="Whose memories.", show_default=False)],
    query: Annotated[
        str | None,
        typer.Option("--query", "-q", help="What to search for; none ranks by score alone."),
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=200, help="At most this many.")] = 10,
    category: Annotated[
        str | None,
        typer.Option(help="Only this category (one of MEMLANE_CATEGORIES)."),
    ] = None,
    tier: Annotated[Tier | None, typer.Option(help="Only this tier.")] = None,
    min_score: Annotated[float, typer.Option(min=0.0, max=1.0, help="Lowest score.")] = 0.0,
    since: Annotated[
        datetime | None,
        typer.Option(help="Stated or last confirmed at or after (ISO date or time, UTC)."),
    ] = None,
    agent: Agent = None,
    where: FilterOption = None,
    as_json: AsJson = False,
) -> None:
    """Search a user's memories: best first, each with its score and the score's parts."""
    from datetime import UTC

    if since is not None and since.tzinfo is None:
        since = since.replace(tzinfo=UTC)
    with lane_session() as lane:
        hits = lane.search(
            user,
            query,
            limit=limit,
            category=category,
            tier=tier,
            min_score=min_score,
            since=since,
            agent_id=agent,
            filter=where,
        )
    if as_json:
        print_json(hits)
        return
    title = f"{user}: {len(hits)} memories" + (f" for {query!r}" if query else "")
    # The short id (as contexts show it; every command takes it): whole, never wrapped.
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("id", justify="right", no_wrap=True)
    for name in ("score", "rel", "imp", "rec", "freq"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("tier", no_wrap=True)
    table.add_column("content", overflow="fold", ratio=1, min_width=20)
    for h in hits:
        table.add_row(
            str(h.memory.ref),
            f"{h.score:.3f}",
            f"{h.relevance:.2f}",
            f"{h.importance:.2f}",
            f"{h.recency:.2f}",
            f"{h.frequency:.2f}",
            h.memory.tier,
            shown(h.memory.content),
        )
    stdout.print(table)
