"""The CLI reference page, generated from the Typer app at build time (mkdocs-gen-files):
every command and group with its help, arguments and options as `memlane … --help`
shows them, so a command or option renamed in memlane.cli shows here with no edit."""

from __future__ import annotations

from typing import Any

import click
import mkdocs_gen_files
import typer

from memlane.cli.app import app

PIPE = "\\|"  # a pipe inside a table cell


def context(command: Any, path: list[str]) -> Any:
    # Typer carries its own click (typer._click): the command's own context class
    return command.context_class(command, info_name=" ".join(path))


def parameter(param: Any, ctx: Any) -> str | None:
    """One row: the parameter as `--help` lists it, and its help with the default."""
    record = param.get_help_record(ctx)
    if record is None:
        return None
    names, text = record
    text = click.unstyle(text).replace("\n", " ").replace("|", PIPE)
    return f"| `{names}` | {text} |"


def section(command: Any, path: list[str], depth: int) -> list[str]:
    ctx = context(command, path)
    lines = [f"{'#' * min(depth, 4)} `{' '.join(path)}`", ""]
    if command.help:
        lines += [click.unstyle(command.help).strip(), ""]
    usage = command.get_usage(ctx).removeprefix("Usage: ")
    lines += ["```text", usage, "```", ""]
    rows = [row for p in command.params if not p.hidden and (row := parameter(p, ctx))]
    if rows:
        lines += ["| argument / option | |", "|---|---|", *rows, ""]
    if hasattr(command, "list_commands"):  # a group
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                lines += section(sub, [*path, name], depth + 1)
    return lines


def page() -> str:
    root = typer.main.get_command(app)
    intro = [
        "# CLI reference",
        "",
        "Generated from the Typer app (`memlane.cli.app`) when the site is built: what",
        "`memlane COMMAND --help` prints. The [CLI page](cli.md) shows the commands by task",
        "and the conventions they share.",
        "",
    ]
    return "\n".join(intro + section(root, ["memlane"], 2)[2:])


if __name__ in ("<run_path>", "__main__"):
    with mkdocs_gen_files.open("cli-reference.md", "w") as out:
        out.write(page())
