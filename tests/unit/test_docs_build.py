"""The documentation site builds offline and strictly (a broken link, a missing page or
snippet fails it), and its generated pages follow the code: every setting of the settings
class, every command of the Typer app and every route of docs/openapi.json is on them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from memlane.cli.app import app
from memlane.config.settings import Settings

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),  # the generators import this checkout's memlane
        "NO_MKDOCS_2_WARNING": "1",
        "DISABLE_MKDOCS_2_WARNING": "true",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def page(site: Path, name: str) -> str:
    return (site / f"{name}.html").read_text(encoding="utf-8")


def test_the_configuration_page_lists_every_setting(site: Path) -> None:
    html = page(site, "configuration")
    for name in Settings.model_fields:
        if name == "weights":
            assert "MEMLANE_WEIGHTS__RELEVANCE" in html
        else:
            assert f"MEMLANE_{name.upper()}" in html, name
    assert "<!-- settings table -->" not in html


def test_the_cli_reference_has_every_command(site: Path) -> None:
    html = page(site, "cli-reference")
    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="memlane")
    for name in root.list_commands(ctx):
        command = root.get_command(ctx, name)
        assert f"memlane {name}" in html, name
        if hasattr(command, "list_commands"):
            for sub in command.list_commands(command.context_class(command)):
                assert f"memlane {name} {sub}" in html, (name, sub)


def test_the_http_api_page_renders_every_route(site: Path) -> None:
    text = re.sub(r"<[^>]+>", "", page(site, "http-api"))  # a path's {param} is in a span
    paths = json.loads((ROOT / "docs" / "openapi.json").read_text())["paths"]
    for path in paths:
        assert path in text, path


def test_the_site_loads_nothing_from_the_network(site: Path) -> None:
    for html in site.rglob("*.html"):
        text = html.read_text(encoding="utf-8")
        remote = re.findall(r'<(?:script|link)[^>]+(?:src|href)="(https?://[^"]+)"', text)
        assert remote == [], (html, remote)
        assert "fonts.googleapis" not in text, html
