"""The configuration page's table, generated from the settings class at build time
(mkdocs-gen-files), so a setting added, renamed or given another default or bound shows
here without anyone editing the page. The meanings are in settings.yaml beside this file;
a setting without one, or a meaning of no setting, fails the build."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Any

import annotated_types
import mkdocs_gen_files
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from memlane.config.settings import Settings

HERE = Path(__file__).parent
MARKER = "<!-- settings table -->"
BOUNDS = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<"}


def rows(model: type[BaseModel], prefix: str) -> list[tuple[str, FieldInfo]]:
    """Each environment variable and its field; a nested model's fields are
    MEMLANE_<FIELD>__<SUBFIELD>, as pydantic-settings reads them."""
    found: list[tuple[str, FieldInfo]] = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            found += rows(annotation, f"{prefix}{name.upper()}__")
        else:
            found.append((f"{prefix}{name.upper()}", field))
    return found


def shown(value: Any) -> str:
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, str):
        return f"`{value}`"
    if isinstance(value, float) and value.is_integer() and value >= 10:
        return str(int(value))
    return str(value)


def default(field: FieldInfo, entry: dict[str, str], variable: str) -> str:
    value = field.default_factory() if field.default_factory else field.default  # type: ignore[call-arg]
    if value is None or value == []:
        if "unset" not in entry:
            raise SystemExit(f"{variable}: no default; say what unset means in settings.yaml")
        return entry["unset"]
    if "unset" in entry:
        raise SystemExit(f"{variable} has a default now: drop its `unset` in settings.yaml")
    return shown(value)


def bounds(field: FieldInfo) -> str:
    parts = []
    for item in field.metadata:
        for attribute, sign in BOUNDS.items():
            bound = getattr(item, attribute, None)
            if isinstance(item, annotated_types.BaseMetadata) and bound is not None:
                parts.append(f"{sign} {shown(bound)}")
    return f" ({', '.join(parts)})" if parts else ""


def table() -> str:
    meanings: dict[str, dict[str, str]] = yaml.safe_load((HERE / "settings.yaml").read_text())
    variables = rows(Settings, "MEMLANE_")
    stray = set(meanings) - {variable for variable, _ in variables}
    if stray:
        raise SystemExit(f"settings.yaml names no setting: {sorted(stray)}")
    lines = ["| variable | default | meaning |", "|---|---|---|"]
    for variable, field in variables:
        entry = meanings.get(variable)
        if entry is None:
            raise SystemExit(f"{variable} has no meaning in docs/gen/settings.yaml")
        meaning = entry["meaning"] + bounds(field)
        lines.append(f"| `{variable}` | {default(field, entry, variable)} | {meaning} |")
    return "\n".join(lines)


def page(template: str) -> str:
    if MARKER not in template:
        raise SystemExit(f"configuration.md lost its {MARKER!r} line")
    return template.replace(MARKER, table())


if __name__ == "<run_path>" or __name__ == "__main__":
    source = (HERE.parent / "configuration.md").read_text(encoding="utf-8")
    with mkdocs_gen_files.open("configuration.md", "w") as out:
        out.write(page(source))
