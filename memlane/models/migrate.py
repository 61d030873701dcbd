"""Schema management: Alembic is the one way the schema is created, on both backends.

Alembic is imported inside the functions: the assembler's start-up should not pay for it.
"""

from __future__ import annotations

from argparse import Namespace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from memlane.models.db import get_engine

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(url: str) -> Config:
    from alembic.config import Config

    config = Config(str(MIGRATIONS / "alembic.ini"))
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(url: str, revision: str = "head") -> None:
    from alembic import command

    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str = "base") -> None:
    from alembic import command

    command.downgrade(alembic_config(url), revision)


def new_revision(
    message: str, *, url: str, autogenerate: bool = False, migrations: Path = MIGRATIONS
) -> Path:
    """Write the next migration file into `migrations`/versions and return its path.

    Numbered after the head ("0007" after "0006"), as the existing files are. With
    `autogenerate`, Alembic compares memlane.models.tables with the database at `url`
    (which must be at the head) and writes the differences it finds; without it, an
    empty upgrade and downgrade to fill in. Plain `alembic revision` cannot do this:
    the configuration lives in the package and env.py takes its URL from memlane.
    """
    from alembic import command
    from alembic.script import ScriptDirectory

    config = alembic_config(url)
    config.set_main_option("script_location", str(migrations))
    # Alembic's own "Generating … done" would print the path a second time.
    config.cmd_opts = Namespace(quiet=True)
    head = ScriptDirectory.from_config(config).get_current_head()
    number = int(head) + 1 if head is not None and head.isdigit() else 1
    script = command.revision(
        config, message=message, autogenerate=autogenerate, rev_id=f"{number:04d}"
    )
    assert script is not None and not isinstance(script, list)  # one head, one file
    return Path(script.path)


def current_revision(url: str) -> str | None:
    """The revision the database is at (None: no schema yet)."""
    with get_engine(url).connect() as connection:
        try:
            return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
        except DBAPIError:
            return None


@cache
def head_revision() -> str | None:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


def is_up_to_date(url: str) -> bool:
    return current_revision(url) == head_revision()
