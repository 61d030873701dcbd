"""`memlane memories …`: list, show, add and curate one user's memories."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from rich import box
from rich.table import Table

from memlane.cli.common import (
    USAGE_EXIT,
    Agent,
    AsJson,
    FilterOption,
    fail,
    lane_session,
    parse_time,
    print_json,
    shown,
    stderr,
    stdout,
)
from memlane.pipeline.records import Tier

if TYPE_CHECKING:
    from memlane.models.schemas import MemoryPublic

StatusFilter = Literal["active", "superseded", "quarantined", "deleted", "all"]

app = typer.Typer(help="List, show, add and curate a user's memories.", no_args_is_help=True)

User = Annotated[str, typer.Option("--user", help="The memory's owner.", show_default=False)]
MemoryId = Annotated[str, typer.Argument(help="A memory id (mem_…).", show_default=False)]


def memories_table(rows: list[MemoryPublic], *, title: str | None = None) -> Table:
    """One line of figures per memory, its content folded in the room left. The id shown
    is the short one (`ref`, as contexts show it; every command takes it): copyable,
    never wrapped, and it leaves the content room at 80 columns."""
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("id", justify="right", no_wrap=True)
    for name in ("tier", "category", "status"):
        table.add_column(name, no_wrap=True)
    for name in ("imp.", "seen"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("content", overflow="fold", ratio=1, min_width=20)
    for m in rows:
        flags = " [sensitive]" if m.sensitive else ""
        table.add_row(
            str(m.ref),
            m.tier,
            m.category,
            m.status,
            f"{m.importance:.2f}",
            str(m.access_count),
            shown(m.content) + flags,
        )
    return table


def _echo_memory(memory: MemoryPublic, as_json: bool) -> None:
    if as_json:
        print_json(memory)
        return
    table = Table(show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in memory.model_dump(mode="json").items():
        table.add_row(key, "" if value is None else shown(str(value)))
    stdout.print(table)


@app.command("list")
def list_memories(
    user: User,
    status: Annotated[StatusFilter, typer.Option(help="Which memories; all = any status.")] = (
        "active"
    ),
    limit: Annotated[int, typer.Option(min=1, max=10_000)] = 100,
    offset: Annotated[int, typer.Option(min=0)] = 0,
    agent: Agent = None,
    where: FilterOption = None,
    as_json: AsJson = False,
) -> None:
    """The user's memories, most important first."""
    with lane_session() as lane:
        rows = lane.list_memories(
            user,
            status=None if status == "all" else status,
            limit=limit,
            offset=offset,
            agent_id=agent,
            filter=where,
        )
    if as_json:
        print_json(rows)
    else:
        noun = "memory" if len(rows) == 1 else "memories"
        which = "of every status" if status == "all" else status
        stdout.print(memories_table(rows, title=f"{user}: {len(rows)} {noun}, {which}"))


@app.command()
def show(user: User, memory_id: MemoryId, as_json: AsJson = False) -> None:
    """One memory, every field."""
    with lane_session() as lane:
        _echo_memory(lane.get_memory(user, memory_id), as_json)


CATEGORY_HELP = "One of MEMLANE_CATEGORIES (preference, fact, decision, project unless set)."


@app.command()
def add(
    user: User,
    content: Annotated[str, typer.Option(help="One sentence.", show_default=False)],
    category: Annotated[str, typer.Option(help=CATEGORY_HELP)] = "fact",
    importance: Annotated[float, typer.Option(help="0..1; ≥0.9 critical, <0.5 minor.")] = 0.7,
    confidence: Annotated[float, typer.Option(help="0..1; 1.0 said by the user.")] = 1.0,
    tier: Annotated[Tier, typer.Option()] = "candidate",
    sensitive: Annotated[
        bool, typer.Option("--sensitive", help="Never put it in a context.")
    ] = False,
    metadata: Annotated[
        str | None,
        typer.Option(
            help='Its metadata, a JSON object, e.g. \'{"team": "eng"}\' (docs/metadata.md).',
            show_default=False,
        ),
    ] = None,
    as_json: AsJson = False,
) -> None:
    """Add a memory by hand; prints its id (--json: {created, memory}). Content that
    duplicates a stored memory (the dedup rule) confirms that one instead, and says so
    on stderr (--json: created is false)."""
    fields: dict[str, object] = {}
    if metadata is not None:
        try:
            fields["metadata"] = json.loads(metadata)
        except json.JSONDecodeError as exc:
            raise ValueError(f"--metadata is no JSON object ({exc.msg}): {metadata!r}") from None
    with lane_session() as lane:
        memory, created = lane.add_or_confirm(
            user,
            {
                "content": content,
                "category": category,
                "importance": importance,
                "confidence": confidence,
                "tier": tier,
                "sensitive": sensitive,
                **fields,
            },
        )
    if not created:
        stderr.print(
            f"a duplicate of #{memory.ref}: confirmed it, seen {memory.access_count} times"
        )
    if as_json:
        print_json({"created": created, "memory": memory})
    else:
        typer.echo(memory.id)


@app.command()
def edit(
    user: User,
    memory_id: MemoryId,
    content: Annotated[str | None, typer.Option(help="The corrected sentence.")] = None,
    category: Annotated[str | None, typer.Option(help=CATEGORY_HELP)] = None,
    importance: Annotated[float | None, typer.Option(help="0..1.")] = None,
    confidence: Annotated[float | None, typer.Option(help="0..1.")] = None,
    expires: Annotated[
        str | None, typer.Option(help="ISO 8601 time it stops being true (UTC if no zone).")
    ] = None,
    no_expiry: Annotated[bool, typer.Option("--no-expiry", help="Clear the expiry.")] = False,
    as_json: AsJson = False,
) -> None:
    """Correct a memory: a new content is re-keyed and re-embedded; each change is kept
    in its history (`memlane memories history`)."""
    if expires is not None and no_expiry:
        fail("give --expires or --no-expiry, not both", USAGE_EXIT)
    fields: dict[str, object] = {
        "content": content,
        "category": category,
        "importance": importance,
        "confidence": confidence,
    }
    if expires is not None:
        try:
            fields["expires_at"] = parse_time(expires, "--expires")
        except ValueError as exc:
            fail(str(exc), USAGE_EXIT)
    if no_expiry:
        fields["expires_at"] = None
    if all(value is None for value in fields.values()) and not no_expiry:
        fail(
            "nothing to change: give --content, --category, --importance, --confidence, "
            "--expires or --no-expiry",
            USAGE_EXIT,
        )
    with lane_session() as lane:
        _echo_memory(lane.update_memory(user, memory_id, fields), as_json)


@app.command()
def history(user: User, memory_id: MemoryId, as_json: AsJson = False) -> None:
    """Where a memory came from and every change since, oldest first (a purged memory,
    named by its full id, keeps only its `purged` event)."""
    with lane_session() as lane:
        events = lane.memory_history(user, memory_id)
    if as_json:
        print_json(events)
        return
    table = Table(title=f"{user}: history of {memory_id}", box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("when (UTC)", no_wrap=True)
    table.add_column("event", no_wrap=True)
    table.add_column("by", no_wrap=True)
    table.add_column("detail", overflow="fold", ratio=1, min_width=20)
    for event in events:
        table.add_row(
            event.at.strftime("%Y-%m-%d %H:%M:%S"),
            event.kind,
            shown(event.actor),
            shown(json.dumps(event.detail, ensure_ascii=False)) if event.detail else "",
        )
    stdout.print(table)


def _report(memory: MemoryPublic, as_json: bool) -> None:
    if as_json:
        print_json(memory)
    else:
        typer.echo(f"{memory.id}: tier {memory.tier}, status {memory.status}")


@app.command()
def pin(user: User, memory_id: MemoryId, as_json: AsJson = False) -> None:
    """Pin: always in the context, never dropped."""
    with lane_session() as lane:
        _report(lane.pin(user, memory_id), as_json)


@app.command()
def verify(user: User, memory_id: MemoryId, as_json: AsJson = False) -> None:
    """Verify: dropped only as a last resort."""
    with lane_session() as lane:
        _report(lane.verify(user, memory_id), as_json)


@app.command()
def quarantine(user: User, memory_id: MemoryId, as_json: AsJson = False) -> None:
    """Quarantine: kept, but never put in a context."""
    with lane_session() as lane:
        _report(lane.quarantine(user, memory_id), as_json)


@app.command()
def forget(user: User, memory_id: MemoryId, as_json: AsJson = False) -> None:
    """Forget: marked deleted, never in a context again, not learned again; reversible
    until purged."""
    with lane_session() as lane:
        _report(lane.forget(user, memory_id), as_json)


@app.command()
def purge(
    user: User,
    memory_id: MemoryId,
    yes: Annotated[bool, typer.Option("--yes", help="Confirm: deleted for good.")] = False,
    as_json: AsJson = False,
) -> None:
    """Delete a memory for good, content included (forgetting is reversible; this is not)."""
    if not yes:
        fail(f"purging {memory_id} deletes it for good; add --yes to do it", USAGE_EXIT)
    with lane_session() as lane:
        purged = lane.purge(user, memory_id)
    if as_json:
        print_json({"purged": purged})
    else:
        typer.echo(f"purged {purged}")


@app.command("lift-fingerprints")
def lift_fingerprints(
    user: User,
    yes: Annotated[
        bool, typer.Option("--yes", help="Confirm: purged facts may come back.")
    ] = False,
    as_json: AsJson = False,
) -> None:
    """Let the user's purged facts be learned again: delete the content-free fingerprints
    their purges left."""
    if not yes:
        fail(f"this lets {user!r}'s purged facts be learned again; add --yes to do it", USAGE_EXIT)
    with lane_session() as lane:
        lifted = lane.lift_fingerprints(user)
    if as_json:
        print_json({"lifted": lifted})
    else:
        typer.echo(f"lifted {lifted} fingerprint(s)")
