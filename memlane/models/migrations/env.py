"""Alembic environment: runs on the URL memlane's settings resolve (or one passed in by
`memlane.models.migrate`)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from memlane.models.tables import Base

config = context.config
target_metadata = Base.metadata


def run_on(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
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
