"""`memlane soul …` and `memlane procedures …`: a user's soul blocks (identity, style,
anti-patterns) and procedures, set, listed and deleted by hand."""

from __future__ import annotations

from typing import Annotated

import typer
from rich import box
from rich.table import Table

from memlane.cli.common import AsJson, lane_session, print_json, shown, stderr, stdout
from memlane.pipeline.records import SoulKind

soul_app = typer.Typer(help="A user's soul blocks: set, list, delete.", no_args_is_help=True)
procedures_app = typer.Typer(help="A user's procedures: add, list, delete.", no_args_is_help=True)

User = Annotated[str, typer.Option("--user", help="The owner.", show_default=False)]
Kind = Annotated[SoulKind, typer.Argument(help="identity, style or anti_patterns.")]


def _table(title: str, *columns: str) -> Table:
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
    for name in columns[:-1]:
        table.add_column(name, no_wrap=True)
    table.add_column(columns[-1], overflow="fold", ratio=1, min_width=20)
    return table


@soul_app.command("set")
def set_soul(
    user: User,
    kind: Kind,
    content: Annotated[str, typer.Option(help="The block's text.", show_default=False)],
    as_json: AsJson = False,
) -> None:
    """Set (or replace) the user's soul block of that kind (--json: the block as stored)."""
    with lane_session() as lane:
        block = lane.set_soul_block(user, kind, content)
    stderr.print(f"{user}: {kind} set")
    if as_json:
        print_json(block)


@soul_app.command("list")
def list_soul(user: User, as_json: AsJson = False) -> None:
    """The user's soul blocks."""
    with lane_session() as lane:
        blocks = lane.soul_blocks(user)
    if as_json:
        print_json(blocks)
        return
    table = _table(f"{user}: {len(blocks)} soul blocks", "kind", "content")
    for block in blocks:
        table.add_row(block.kind, shown(block.content))
    stdout.print(table)


@soul_app.command("delete")
def delete_soul(user: User, kind: Kind, as_json: AsJson = False) -> None:
    """Delete the user's soul block of that kind."""
    with lane_session() as lane:
        lane.delete_soul_block(user, kind)
    stderr.print(f"{user}: {kind} deleted")
    if as_json:
        print_json({"user_id": user, "deleted": kind})


@procedures_app.command("add")
def add_procedure(
    user: User,
    name: Annotated[str, typer.Option(help="Unique per user.", show_default=False)],
    content: Annotated[str, typer.Option(help="The steps.", show_default=False)],
    as_json: AsJson = False,
) -> None:
    """Add a procedure; prints its id (--json: the procedure as stored)."""
    with lane_session() as lane:
        procedure = lane.add_procedure(user, name, content)
    if as_json:
        print_json(procedure)
    else:
        typer.echo(procedure.id)


@procedures_app.command("list")
def list_procedures(user: User, as_json: AsJson = False) -> None:
    """The user's procedures."""
    with lane_session() as lane:
        found = lane.procedures(user)
    if as_json:
        print_json(found)
        return
    table = _table(f"{user}: {len(found)} procedures", "id", "name", "content")
    for procedure in found:
        table.add_row(procedure.id, shown(procedure.name), shown(procedure.content))
    stdout.print(table)


@procedures_app.command("delete")
def delete_procedure(
    user: User,
    procedure: Annotated[str, typer.Argument(help="Its id or its name.", show_default=False)],
    as_json: AsJson = False,
) -> None:
    """Delete a procedure named by its id or its name."""
    with lane_session() as lane:
        deleted = lane.delete_procedure(user, procedure)
    stderr.print(f"{user}: procedure {deleted} deleted")
    if as_json:
        print_json({"user_id": user, "deleted": deleted})
