"""`memlane users …`: operations on a user as a whole."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Annotated, BinaryIO

import typer
from rich.progress import Progress

from memlane.cli.common import (
    USAGE_EXIT,
    AsJson,
    fail,
    lane_session,
    print_json,
    progress_bar,
    stderr,
)
from memlane.models.store.users.export import TABLES

app = typer.Typer(
    help="Users as a whole: erase, export, import; delete one of their conversations.",
    no_args_is_help=True,
)


@app.command()
def erase(
    user: Annotated[str, typer.Option("--user", help="The user to erase.", show_default=False)],
    yes: Annotated[
        bool, typer.Option("--yes", help="Confirm: the user's data is deleted for good.")
    ] = False,
    as_json: AsJson = False,
) -> None:
    """Delete every row of the user in one transaction: messages, conversations, jobs,
    memories and their vectors, episodes, procedures, soul blocks, context packs. For
    "delete my data"; it cannot be undone."""
    if not yes:
        fail(f"erasing {user!r} deletes all their data for good; add --yes to do it", USAGE_EXIT)
    with lane_session() as lane:
        counts = lane.erase_user(user)
    kept = ", ".join(f"{n} {table}" for table, n in counts.items() if n)
    stderr.print(f"erased user {user}: {kept or 'nothing was stored for them'}")
    if as_json:
        print_json({"user_id": user, "deleted": counts})


@app.command("delete-conversation")
def delete_conversation(
    user: Annotated[str, typer.Option("--user", help="The owner.", show_default=False)],
    conversation: Annotated[str, typer.Argument(help="The conversation id.", show_default=False)],
    yes: Annotated[bool, typer.Option("--yes", help="Confirm: deleted for good.")] = False,
    as_json: AsJson = False,
) -> None:
    """Delete one conversation ("delete this chat"): its messages, jobs, episodes and the
    memories learned only from it (one another conversation also stated stays, without
    this one's evidence)."""
    if not yes:
        fail(f"deleting {conversation!r} is for good; add --yes to do it", USAGE_EXIT)
    with lane_session() as lane:
        counts = lane.delete_conversation(user, conversation)
    done = ", ".join(f"{n} {what.replace('_', ' ')}" for what, n in counts.items() if n)
    stderr.print(f"deleted conversation {conversation}: {done or 'it held nothing'}")
    if as_json:
        print_json({"user_id": user, "conversation_id": conversation, "deleted": counts})


@app.command()
def export(
    user: Annotated[str, typer.Option("--user", help="The user to export.", show_default=False)],
    messages: Annotated[
        bool, typer.Option("--messages", help="Include conversations and messages.")
    ] = False,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            help="What this agent sees: the shared data and its own (default: every agent's).",
            show_default=False,
        ),
    ] = None,
    where: Annotated[
        str | None,
        typer.Option(
            "--filter",
            help="Only the conversations, memories and episodes whose metadata passes this "
            'JSON filter, e.g. \'{"team": "eng"}\' (docs/metadata.md).',
            show_default=False,
        ),
    ] = None,
) -> None:
    """Print the user's data as JSON lines (memories with their history, episodes,
    procedures, soul blocks; with --messages their conversations), for `memlane users
    import` into another deployment: memlane users export --user U > u.jsonl (JSON lines
    always, so no --json)."""
    with lane_session() as lane:
        for line in lane.export_user(user, messages=messages, agent_id=agent, filter=where):
            typer.echo(line)


@app.command("import")
def import_(
    file: Annotated[Path, typer.Argument(help="An export (- for stdin).", show_default=False)],
    user: Annotated[
        str | None, typer.Option("--user", help="Import as this user (default: the exported).")
    ] = None,
    merge: Annotated[
        bool, typer.Option("--merge", help="Keep what is stored for ids the store holds.")
    ] = False,
    as_json: AsJson = False,
) -> None:
    """Import an export, ids kept; refused when the user holds some of its ids, unless
    --merge (which keeps the stored ones and adds the rest). Every row is checked
    before anything is written (an error names the line and field). Rows whose ids
    another user of this store holds are imported under new ids (a copy); active
    memories a stored one already says, or that a purge keeps out, are left out."""
    with progress_bar() as bar, lane_session() as lane:
        if str(file) == "-":
            lines = _counted(sys.stdin.buffer, bar, None)
            counts = lane.import_user(lines, user_id=user, merge=merge)
        else:
            with file.open("rb") as source:
                total = sum(1 for _ in source)
                counts = lane.import_user(_Reread(source, bar, total), user_id=user, merge=merge)
        bar.stop()
    added = ", ".join(f"{n} {table}" for table, n in counts.items() if n and table in TABLES)
    details = {what: n for what, n in counts.items() if what not in TABLES}
    also = "".join(f"; {n} {what.replace('_', ' ')}" for what, n in details.items())
    stderr.print(f"imported {added or 'nothing new'}{also}")
    if as_json:
        print_json(
            {"imported": {t: n for t, n in counts.items() if t in TABLES}, "details": details}
        )


class _Reread:
    """A file's lines, from its start each time they are iterated (the import reads them
    twice, checking then writing, instead of keeping the rows), the bar following."""

    def __init__(self, source: BinaryIO, bar: Progress, total: int) -> None:
        self.source, self.bar, self.total = source, bar, total
        self.readings = 0

    def __iter__(self) -> Iterator[bytes]:
        self.source.seek(0)
        self.readings += 1
        step = "checking" if self.readings == 1 else "writing"
        return _counted(self.source, self.bar, self.total, step)


def _counted(
    lines: Iterable[bytes], bar: Progress, total: int | None, step: str = "checking"
) -> Iterator[bytes]:
    """The lines, read one by one, the bar following every thousandth (the rows are
    checked first, then read again and written, in one transaction)."""
    reading = bar.add_task(step, total=total, unit="lines")
    count = 0
    for count, line in enumerate(lines, start=1):
        if count % 1000 == 0:
            bar.update(reading, completed=count)
        yield line
    bar.update(reading, completed=count, total=count)
