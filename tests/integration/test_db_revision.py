"""`memlane db revision`: the recipe for a migration (docs/architecture.md, "Where to change what"),
run into a copy of the migrations folder so the package's stays as it is."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

from typer.testing import CliRunner

from memlane.cli.app import app
from memlane.models import migrate


def run(url: str, *args: str) -> str:
    result = CliRunner().invoke(app, list(args), env={"MEMLANE_DATABASE_URL": url})
    assert result.exit_code == 0, result.output
    return result.stdout


def revision_of(path: Path) -> dict[str, object]:
    """The module-level assignments of a migration file (revision, down_revision, …)."""
    found: dict[str, object] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = ast.literal_eval(node.value)
    return found


def test_a_new_revision_follows_the_head_and_autogenerate_finds_the_tables_in_step(
    tmp_path: Path,
) -> None:
    migrations = tmp_path / "migrations"
    shutil.copytree(migrate.MIGRATIONS, migrations)
    url = f"sqlite:///{tmp_path / 'at-head.db'}"
    run(url, "db", "upgrade")
    head = migrate.head_revision()
    assert head is not None

    # Autogenerate compares the tables with the database at the head: nothing to write.
    generated = Path(
        run(
            url, "db", "revision", "-m", "Tables", "--autogenerate", "--migrations", str(migrations)
        ).strip()
    )
    next_id = f"{int(head) + 1:04d}"
    assert generated.parent == migrations / "versions"
    assert generated.name == f"{next_id}_tables.py"
    assert (revision_of(generated)["revision"], revision_of(generated)["down_revision"]) == (
        next_id,
        head,
    )
    assert "op." not in generated.read_text(encoding="utf-8").split("def upgrade", 1)[1]

    # An empty one follows it: one head, numbered in order, the message as its title.
    empty = Path(
        run(url, "db", "revision", "-m", "Add a column", "--migrations", str(migrations)).strip()
    )
    assert empty.name == f"{int(head) + 2:04d}_add_a_column.py"
    assert revision_of(empty)["down_revision"] == next_id
    assert empty.read_text(encoding="utf-8").startswith('"""Add a column')
    # The package's own folder is untouched.
    assert migrate.head_revision() == head
    assert not list(migrate.MIGRATIONS.joinpath("versions").glob(f"{int(head) + 1:04d}_*"))
