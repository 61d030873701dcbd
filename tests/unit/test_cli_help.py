"""`memlane … --help` reads well at 80 columns: no line wider, no `<bool>` beside a flag
(a flag takes no value), and prose wrapped by the terminal, not by the docstring's own
line breaks (which left a word alone on a line)."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from memlane.cli.app import app

WIDTH = 80


def command_paths(command: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [prefix]
    for name, sub in getattr(command, "commands", {}).items():
        paths.extend(command_paths(sub, (*prefix, name)))
    return paths


COMMANDS = command_paths(typer.main.get_command(app))


def help_of(path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": str(WIDTH)})
    assert result.exit_code == 0, result.output
    return result.output


def test_every_command_is_checked() -> None:
    assert len(COMMANDS) > 20
    assert ("packs", "show") in COMMANDS and ("memories", "list") in COMMANDS


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "memlane")
def test_help_fits_80_columns_without_bool_placeholders(path: tuple[str, ...]) -> None:
    text = help_of(path)
    assert max(len(line) for line in text.splitlines()) <= WIDTH
    assert "<bool>" not in text


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "memlane")
def test_the_description_is_wrapped_only_where_the_next_word_would_not_fit(
    path: tuple[str, ...],
) -> None:
    text = help_of(path)
    description = text.split("╭")[0].splitlines()
    start = next(i for i, line in enumerate(description) if "Usage:" in line) + 1
    lines = [line.rstrip() for line in description[start:]]
    for line, after in pairwise(lines):
        if line.strip() and after.strip():  # two lines of one paragraph
            next_word = after.split()[0]
            assert len(line) + 1 + len(next_word) > WIDTH - 1, (line, after)
