"""One source for each setting: every field of memlane.config.settings.Settings is read
somewhere outside config/ (a setting read by nothing is a promise kept by nothing), and
the pipeline repeats none of their defaults: a parameter that a setting decides takes
no default there, so a changed setting cannot be silently ignored by a call that leaves
the argument out. Both by scanning the source (ast), not by running it."""

from __future__ import annotations

import ast
from pathlib import Path

from memlane.config.settings import Settings

PACKAGE = Path(__file__).resolve().parents[2] / "memlane"
# Parameter names the pipeline gives the settings it takes (the rest use the same name).
PIPELINE_NAMES = {
    "threshold": "dedup_threshold",
    "min_keywords": "dedup_min_keywords",
    "max_memories": "max_memories_per_extraction",
    "every": "extract_every",
    "window": "extract_window",
    "dim": "embedding_dim",
}


def trees(folder: Path) -> dict[Path, ast.Module]:
    return {path: ast.parse(path.read_text(encoding="utf-8")) for path in folder.rglob("*.py")}


def attributes_read(modules: dict[Path, ast.Module]) -> set[str]:
    return {
        node.attr
        for tree in modules.values()
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
    }


def settings_properties() -> dict[str, set[str]]:
    """Each property of Settings and the fields it reads (`self.X`)."""
    source = PACKAGE / "config" / "settings.py"
    tree = ast.parse(source.read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Settings")
    found = {}
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and any(
            isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list
        ):
            found[node.name] = {
                n.attr
                for n in ast.walk(node)
                if isinstance(n, ast.Attribute)
                and isinstance(n.value, ast.Name)
                and n.value.id == "self"
            }
    return found


def test_every_setting_is_read_outside_config() -> None:
    outside = {
        path: tree
        for path, tree in trees(PACKAGE).items()
        if path.relative_to(PACKAGE).parts[0] != "config"
    }
    read = attributes_read(outside)
    for name, fields in settings_properties().items():
        if name in read:  # a property read outside config reads its fields
            read |= fields
    unread = sorted(set(Settings.model_fields) - read)
    assert unread == [], f"settings read by nothing outside config/: {unread}"


def test_the_scan_sees_a_setting_read_only_through_a_property() -> None:
    # database_url is read through resolved_database_url alone
    assert "database_url" in settings_properties()["resolved_database_url"]


def _defaulted_parameters(tree: ast.Module) -> list[tuple[str, int]]:
    """(name, line) of every parameter with a default and every dataclass-style field
    with a value (`name: type = value`) in a class body."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            positional = [*args.posonlyargs, *args.args]
            for arg in positional[len(positional) - len(args.defaults) :]:
                found.append((arg.arg, arg.lineno))
            for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
                if default is not None:
                    found.append((arg.arg, arg.lineno))
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if (
                    isinstance(item, ast.AnnAssign)
                    and item.value is not None
                    and isinstance(item.target, ast.Name)
                ):
                    found.append((item.target.id, item.lineno))
    return found


def test_the_pipeline_repeats_no_settings_default() -> None:
    decided = set(Settings.model_fields) | set(PIPELINE_NAMES)
    repeated = [
        f"{path.relative_to(PACKAGE)}:{line} {name}"
        for path, tree in trees(PACKAGE / "pipeline").items()
        for name, line in _defaulted_parameters(tree)
        if name in decided
    ]
    assert repeated == [], "defaults that memlane.config.settings holds: " + ", ".join(repeated)


def test_the_pipeline_scan_finds_a_defaulted_setting() -> None:
    tree = ast.parse(
        "def f(x, *, half_life_hours: float = 168.0): ...\n"
        "class C:\n    memory_share: float = 0.5\n"
    )
    assert [name for name, _ in _defaulted_parameters(tree)] == ["half_life_hours", "memory_share"]


def test_the_pipeline_weights_have_no_defaults_of_their_own() -> None:
    from dataclasses import MISSING, fields

    from memlane.pipeline.ranking.scoring import Weights

    assert all(f.default is MISSING for f in fields(Weights))
