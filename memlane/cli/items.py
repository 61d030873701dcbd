"""`memlane soul …` and `memlane procedures …`: a user's soul blocks (identity, style,
anti-patterns) and procedures, set, listed and deleted by hand."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich import box
from rich.table import Table

from memlane.cli.common import lane_session, shown, stderr, stdout
from memlane.pipeline.records import SoulKind

soul_app = typer.Typer(help="A user's soul blocks: set, list, delete.", no_args_is_help=True)
procedures_app = typer.Typer(help="A user's procedures: add, list, delete.", no_args_is_help=True)

User = Annotated[str, typer.Option("--user", help="The owner.", show_default=False)]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
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
) -> None:
    """Set (or replace) the user's soul block of that kind."""
    with lane_session() as lane:
        lane.set_soul_block(user, kind, content)
    stderr.print(f"{user}: {kind} set")


@soul_app.command("list")
def list_soul(user: User, as_json: AsJson = False) -> None:
    """The user's soul blocks."""
    with lane_session() as lane:
        blocks = lane.soul_blocks(user)
    if as_json:
        typer.echo(json.dumps([b.model_dump(mode="json") for b in blocks], indent=2))
        return
    table = _table(f"{user}: {len(blocks)} soul blocks", "kind", "content")
    for block in blocks:
        table.add_row(block.kind, shown(block.content))
    stdout.print(table)


@soul_app.command("delete")
def delete_soul(user: User, kind: Kind) -> None:
    """Delete the user's soul block of that kind."""
    with lane_session() as lane:
        lane.delete_soul_block(user, kind)
    stderr.print(f"{user}: {kind} deleted")


@procedures_app.command("add")
def add_procedure(
    user: User,
    name: Annotated[str, typer.Option(help="Unique per user.", show_default=False)],
    content: Annotated[str, typer.Option(help="The steps.", show_default=False)],
) -> None:
    """Add a procedure; prints its id."""
    with lane_session() as lane:
        typer.echo(lane.add_procedure(user, name, content).id)


@procedures_app.command("list")
def list_procedures(user: User, as_json: AsJson = False) -> None:
    """The user's procedures."""
    with lane_session() as lane:
        found = lane.procedures(user)
    if as_json:
        typer.echo(json.dumps([p.model_dump(mode="json") for p in found], indent=2))
        return
    table = _table(f"{user}: {len(found)} procedures", "id", "name", "content")
    for procedure in found:
        table.add_row(procedure.id, shown(procedure.name), shown(procedure.content))
    stdout.print(table)


@procedures_app.command("delete")
def delete_procedure(
    user: User,
    procedure: Annotated[str, typer.Argument(help="Its id or its name.", show_default=False)],
) -> None:
    """Delete a procedure named by its id or its name."""
    with lane_session() as lane:
        deleted = lane.delete_procedure(user, procedure)
    stderr.print(f"{user}: procedure {deleted} deleted")
