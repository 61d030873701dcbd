"""The docs' command lines and configuration blocks, checked against the code: every
`memlane …` line of the CLI page is parsed by the real Typer app (a command or option
renamed fails here), the scripts the quick start names exist, and the MCP client
configurations name the CLI's options, its defaults and real settings."""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from memlane.cli.app import app
from memlane.config.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def blocks(page: Path, language: str) -> list[str]:
    text = page.read_text(encoding="utf-8")
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.M | re.S)


def command_lines(block: str) -> list[list[str]]:
    """Each `memlane …` command of a shell block as argv (without `memlane`): comments,
    redirections and `[optional]` brackets dropped; `a|b|c` gives the first alternative
    with the line's arguments and the others as `… b --help` alone."""
    commands = []
    for line in block.splitlines():
        line = re.sub(r"\s+#.*$", "", line)
        for part in line.split(" ; "):
            argv = shlex.split(re.sub(r"\[([^\]]+)\]", r"\1", part.split(" > ")[0]))
            if not argv or argv[0] != "memlane":
                continue
            argv = argv[1:]
            for i, word in enumerate(argv):
                if "|" in word and not word.startswith("-"):
                    first, *others = word.split("|")
                    commands += [[*argv[:i], other] for other in others]
                    argv[i] = first
            commands.append(argv)
    return commands


def test_every_command_line_of_the_cli_page_parses() -> None:
    lines = [argv for block in blocks(DOCS / "cli.md", "sh") for argv in command_lines(block)]
    assert len(lines) >= 30
    runner = CliRunner()
    os.environ.setdefault("COLUMNS", "200")
    for argv in lines:
        # --help is eager: it ends the command once every word before it has parsed, so
        # an unknown command or option still fails (exit 2) and nothing runs
        result = runner.invoke(app, [*argv, "--help"])
        assert result.exit_code == 0, (argv, result.output[-500:])


def test_a_renamed_option_would_fail_the_check() -> None:
    result = CliRunner().invoke(app, ["assemble", "--usr", "maya", "--help"])
    assert result.exit_code == 2


@pytest.mark.parametrize("page", [ROOT / "README.md", DOCS / "quickstart.md"])
def test_the_two_commands_are_the_repositorys_scripts(page: Path) -> None:
    (block,) = [b for b in blocks(page, "sh") if "scripts/" in b]
    scripts = re.findall(r"^(scripts/\S+)", block, flags=re.M)
    assert scripts == ["scripts/demo.sh", "scripts/test.sh"]
    for script in scripts:
        assert os.access(ROOT / script, os.X_OK), script


def mcp_option_default(name: str) -> object:
    root = typer.main.get_command(app)
    mcp = root.get_command(root.context_class(root), "mcp")
    assert mcp is not None
    (param,) = [p for p in mcp.params if p.name == name]
    return param.default


def test_the_mcp_configurations_use_the_clis_options_and_real_settings() -> None:
    stdio = json.loads((DOCS / "snippets" / "mcp_stdio.json").read_text())["mcpServers"]
    server = stdio["memlane"]
    assert server["command"] == "memlane"
    assert CliRunner().invoke(app, [*server["args"], "--help"]).exit_code == 0
    settings = {f"MEMLANE_{name.upper()}" for name in Settings.model_fields}
    assert set(server["env"]) <= settings
    http = json.loads((DOCS / "snippets" / "mcp_http.json").read_text())["mcpServers"]
    url = http["memlane"]["url"]
    assert url == f"http://127.0.0.1:{mcp_option_default('port')}{mcp_option_default('path')}"
    assert http["memlane"]["headers"]["Authorization"].startswith("Bearer ")
