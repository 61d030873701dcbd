from __future__ import annotations

from pathlib import Path

from sqlalchemy import inspect, text

from models import migrate
from models.db import get_engine
from models.tables import Base
from tests.integration.conftest import PG_ADMIN_URL


def _tables(url: str) -> set[str]:
    return set(inspect(get_engine(url)).get_table_names()) - {"alembic_version"}


def test_sqlite_migrates_up_down_and_up_again(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    migrate.upgrade(url)
    assert _tables(url) == set(Base.metadata.tables)
    assert migrate.is_up_to_date(url)
    migrate.downgrade(url)
    assert _tables(url) == set()
    migrate.upgrade(url)
    assert migrate.current_revision(url) == migrate.head_revision()


def test_postgres_migrates_up_down_and_up_again(pg_url: str) -> None:
    import psycopg

    scratch = "memlane_migration_test"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{scratch}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{scratch}"')
    url = pg_url.rsplit("/", 1)[0] + "/" + scratch
    try:
        migrate.upgrade(url)
        assert _tables(url) == set(Base.metadata.tables)
        with get_engine(url).connect() as conn:
            column_type = conn.execute(
                text(
                    "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                    "WHERE attrelid = 'memories'::regclass AND attname = 'embedding'"
                )
            ).scalar_one()
        assert column_type == "vector"
        migrate.downgrade(url)
        assert _tables(url) == set()
        migrate.upgrade(url)
        assert migrate.is_up_to_date(url)
    finally:
        get_engine(url).dispose()
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{scratch}" WITH (FORCE)')


def test_the_models_match_the_migrations(pg_url: str) -> None:
    """A table change without a migration would make this fail."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    with get_engine(pg_url).connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    # The embedding column is a TypeDecorator in the models and pgvector's type in the
    # migration; both are `vector` in the database, which autogenerate cannot compare.
    diff = [d for d in diff if not (d[0] == "modify_type" and d[3] == "embedding")]
    assert diff == []
