"""`memlane users …`: operations on a user as a whole."""

from __future__ import annotations

from typing import Annotated

import typer

from memlane.cli_common import USAGE_EXIT, fail, lane_session, stderr

app = typer.Typer(help="Users as a whole: erase one.", no_args_is_help=True)


@app.command()
def erase(
    user: Annotated[str, typer.Option("--user", help="The user to erase.", show_default=False)],
    yes: Annotated[
        bool, typer.Option("--yes", help="Confirm: the user's data is deleted for good.")
    ] = False,
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
