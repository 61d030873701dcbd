"""Alembic environment: runs on the URL memlane's settings resolve (or one passed in by
`memlane.models.migrate`)."""

from __future__ import annotations

from typing import Any

from alembic import context
from sqlalchemy import Connection

from memlane.models.tables import Base

config = context.config
target_metadata = Base.metadata


def run_on(connection: Connection) -> None:
    postgres = connection.dialect.name == "postgresql"

    def on_this_store(obj: Any, _name: str | None, kind: str, *_: Any) -> bool:
        # a GIN index (metadata, 0016) is PostgreSQL's alone: autogenerate on SQLite
        # must not ask for it
        return postgres or kind != "index" or "postgresql_using" not in obj.dialect_kwargs

    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=not postgres,
        compare_type=True,
        include_object=on_this_store,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is None:
    from memlane.models.db import get_engine

    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database URL given to the migrations")
    with get_engine(url).connect() as conn:
        run_on(conn)
        conn.commit()
else:
    run_on(connection)
