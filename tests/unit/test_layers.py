"""The layout is the architecture: each part of memlane is a package, imports point
inward only, no module imports itself back through others, and no folder grows past what
a reader takes in.

Imports are read from the source with `ast` (every import, those inside functions and
under TYPE_CHECKING included), so a violation is caught even in code no test runs. The
parts, from the outside in:

- front doors, one package each: `cli`, `api`, `client`, `mcp`. Each may use the use
  cases and what they hand back (models' wire schemas, the pipeline's records and
  errors) and the settings; never another door, but the CLI may launch the server or
  the MCP server.
- `service`: the use cases (the facade and what it delegates to); no door.
- `workers`: Celery tasks, embedders, the LLM; the store, the pipeline, config.
- `models`: tables, migrations, the store, wire schemas; the pipeline and config.
- `pipeline`: the pure rules; nothing of the project (tests/unit/test_pipeline_purity.py
  also bans I/O, clock and environment there).
- `config`: settings, queue names, logging; nothing of the project.
- the package itself (`memlane/__init__.py`: `from memlane import Memlane` and the
  public errors; `__main__.py`: `python -m memlane`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

import memlane

PACKAGE = Path(memlane.__file__).parent
ROOT = "memlane"
DOORS = ("cli", "api", "client", "mcp")
PARTS = ("pipeline", "config", "models", "workers", "service", *DOORS)
# What a door may use: the use cases and what they return, and the settings.
_DOOR_MAY = frozenset({"service", "models", "pipeline", "config"})
ALLOWED: dict[str, frozenset[str]] = {
    "pipeline": frozenset({"pipeline"}),
    "config": frozenset({"config"}),
    "models": frozenset({"models", "pipeline", "config"}),
    "workers": frozenset({"workers", "models", "pipeline", "config"}),
    "service": frozenset({"service", "workers", "models", "pipeline", "config"}),
    "api": _DOOR_MAY | {"api"},
    "mcp": _DOOR_MAY | {"mcp"},
    # the client runs in a chat app: no use case, no settings of the server's
    "client": frozenset({"client", "models", "pipeline"}),
    # `memlane serve` and `memlane mcp` launch the other doors
    "cli": _DOOR_MAY | {"cli", "api", "mcp"},
    ROOT: frozenset({ROOT, "service", "pipeline", "workers", "cli", "config"}),
}
MAX_MODULES_PER_FOLDER = 15


def module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    names = list(relative.parts)
    if names[-1] == "__init__":
        names.pop()
    return ".".join(names)


def part_of(module: str) -> str:
    """The part a dotted module name of memlane belongs to: the package under memlane/
    that holds it, or memlane itself for its two root modules."""
    names = module.split(".")
    if len(names) == 1 or names[1] == "__main__":
        return ROOT
    return names[1]


def imported(
    module: str, source: str, *, is_package: bool = False, modules: Iterable[str] = ()
) -> list[str]:
    """The memlane modules `source` (the text of `module`) imports, relative imports
    resolved. `from a import b` is a.b when `modules` holds it (b is a module), else a."""
    known = set(modules)
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
            for alias in node.names:
                inner = f"{origin}.{alias.name}"
                found.append(inner if inner in known else origin)
    return [name for name in found if name == ROOT or name.startswith(ROOT + ".")]


SOURCES = sorted(PACKAGE.rglob("*.py"))
# A migration history grows by a file per schema change and is read one file at a time.
HISTORY = PACKAGE / "models" / "migrations" / "versions"
MODULES = {module_name(path): path for path in SOURCES}


def imports_of(module: str) -> set[str]:
    path = MODULES[module]
    source = path.read_text(encoding="utf-8")
    return set(imported(module, source, is_package=path.stem == "__init__", modules=MODULES))


def import_graph() -> dict[str, set[str]]:
    """Each module of memlane and the modules it imports (a package's __init__ counts
    only where the package itself is imported, not for each of its modules)."""
    return {module: imports_of(module) - {module} for module in MODULES}


def circles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The import circles of a graph: its strongly connected parts of two or more
    modules (Tarjan's algorithm, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph.get(start, ())))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(graph.get(target, ()))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    part = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        part.append(member)
                        if member == node:
                            break
                    if len(part) > 1:
                        found.append(sorted(part))
    return found


def test_every_module_is_in_a_part() -> None:
    """A new front door is a package of its own, never a module beside the others."""
    outside = [m for m in MODULES if part_of(m) not in (*PARTS, ROOT)]
    assert not outside, f"modules in no part (make them a package under memlane/): {outside}"
    assert {part_of(m) for m in MODULES} == {*PARTS, ROOT}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_follow_the_table(module: str) -> None:
    part = part_of(module)
    wrong = sorted(name for name in imports_of(module) if part_of(name) not in ALLOWED[part])
    assert not wrong, f"{part} may import only {sorted(ALLOWED[part])}: imports {wrong}"


def test_no_module_imports_itself_back() -> None:
    found = circles(import_graph())
    assert not found, f"import circles (hand a helper the parts it uses instead): {found}"


def test_the_circle_check_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}, "f": {"d"}}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_folder_holds_more_than_fifteen_modules() -> None:
    folders: dict[Path, int] = {}
    for path in SOURCES:
        if path.name != "__init__.py" and path.parent != HISTORY:
            folders[path.parent] = folders.get(path.parent, 0) + 1
    crowded = {
        str(folder.relative_to(PACKAGE)): count
        for folder, count in folders.items()
        if count > MAX_MODULES_PER_FOLDER
    }
    assert not crowded, f"folders over {MAX_MODULES_PER_FOLDER} modules (split by part): {crowded}"


def test_the_scan_sees_every_form_of_import() -> None:
    # Inside a function, under TYPE_CHECKING, relative, and a part imported by name.
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from memlane.service.facade import Memlane\n"
        "def f():\n"
        "    import memlane.workers.app\n"
        "from ..pipeline import errors\n"
        "from . import db\n"
        "from memlane import workers\n"
    )
    known = {"memlane.models.db", "memlane.pipeline.errors", "memlane.workers"}
    found = imported("memlane.models.store", source, is_package=True, modules=known)
    assert sorted(found) == [
        "memlane.models.pipeline",  # ".." of memlane.models.store is memlane.models
        "memlane.models.store",  # its `db` is no module of `known`
        "memlane.service.facade",
        "memlane.workers",
        "memlane.workers.app",
    ]
    assert [part_of(name) for name in ("memlane.workers.app", "memlane.cli.app", "memlane")] == [
        "workers",
        "cli",
        ROOT,
    ]


def test_a_name_imported_from_a_module_is_an_edge_to_that_module() -> None:
    graph = import_graph()
    # "from memlane.models.store.memories import memories": the module, not its package
    assert "memlane.models.store.memories.memories" in graph["memlane.service.memories"]
    assert "memlane.models.store.memories" not in graph["memlane.service.memories"]
    # the client's package re-exports its two clients
    assert graph["memlane.client"] == {
        "memlane.client.aio",
        "memlane.client.calls",
        "memlane.client.sync",
    }
