"""Imports point one way: each part of memlane imports only the parts its row allows.

Read from the source with `ast` (every import, those inside functions and under
TYPE_CHECKING included), so a violation is caught even in code no test runs. The parts:

- pipeline: the pure rules; nothing of the project (tests/unit/test_pipeline_purity.py
  also bans I/O, clock and environment there)
- config: settings and queue names, read by every other part; nothing of the project
- models: tables, migrations, the store; the pipeline's records and rules, config
- workers: Celery tasks, embedders, the LLM; pipeline, models, config
- front doors (everything else: facade, api, client, cli*, mcp): anything
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import memlane

PACKAGE = Path(memlane.__file__).parent
PARTS = ("pipeline", "config", "models", "workers")
FRONT = "front doors"
ALLOWED: dict[str, frozenset[str]] = {
    "pipeline": frozenset({"pipeline"}),
    "config": frozenset({"config"}),
    "models": frozenset({"models", "pipeline", "config"}),
    "workers": frozenset({"workers", "pipeline", "models", "config"}),
    FRONT: frozenset({*PARTS, FRONT}),
}


def part_of(module: str) -> str:
    """The part a dotted module name of memlane belongs to ("memlane" itself: a front door)."""
    names = module.split(".")
    return names[1] if len(names) > 1 and names[1] in PARTS else FRONT


def module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    names = list(relative.parts)
    if names[-1] == "__init__":
        names.pop()
    return ".".join(names)


def imported(module: str, source: str, *, is_package: bool = False) -> list[str]:
    """The memlane modules `source` (the text of `module`) imports, relative imports
    resolved."""
    package = module if is_package else module.rpartition(".")[0]
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                names = package.split(".")
                base = names[: len(names) - (node.level - 1)]
                origin = ".".join([*base, node.module] if node.module else base)
            else:
                origin = node.module or ""
            found.append(origin)
            # "from memlane import workers" imports memlane.workers
            if origin == "memlane":
                found.extend(f"memlane.{alias.name}" for alias in node.names)
    return [name for name in found if name == "memlane" or name.startswith("memlane.")]


SOURCES = sorted(PACKAGE.rglob("*.py"))


def test_every_part_is_found() -> None:
    parts = {part_of(module_name(path)) for path in SOURCES}
    assert parts == {*PARTS, FRONT}


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_follow_the_table(path: Path) -> None:
    module = module_name(path)
    part = part_of(module)
    found = imported(
        module, path.read_text(encoding="utf-8"), is_package=path.name == "__init__.py"
    )
    wrong = [
        name
        for name in found
        # the bare package: what "from memlane.x import y" brings is listed as memlane.x
        if name != "memlane" and part_of(name) not in ALLOWED[part]
    ]
    assert not wrong, f"{part} may import only {sorted(ALLOWED[part])}: imports {wrong}"


def test_the_scan_sees_every_form_of_import() -> None:
    # Inside a function, under TYPE_CHECKING, relative, and a part imported by name.
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from memlane.facade import Memlane\n"
        "def f():\n"
        "    import memlane.workers.app\n"
        "from ..pipeline import errors\n"
        "from . import db\n"
        "from memlane import workers\n"
    )
    found = imported("memlane.models.store", source, is_package=True)
    assert sorted(found) == [
        "memlane",
        "memlane.facade",
        "memlane.models.pipeline",  # ".." of memlane.models.store is memlane.models
        "memlane.models.store",
        "memlane.workers",
        "memlane.workers.app",
    ]
    assert [part_of(name) for name in ("memlane.workers.app", "memlane.facade", "memlane")] == [
        "workers",
        FRONT,
        FRONT,
    ]
