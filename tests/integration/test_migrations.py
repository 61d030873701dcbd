from __future__ import annotations

from hashlib import sha256
from pathlib import Path

from sqlalchemy import inspect, text

from memlane.models import migrate
from memlane.models.db import get_engine
from memlane.models.tables import Base
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
    # The embedding columns are a TypeDecorator in the models and pgvector's type in the
    # migration; both are `vector` in the database, which autogenerate cannot compare.
    diff = [
        d for d in diff if not (d[0] == "modify_type" and d[3] in ("embedding", "embedding_next"))
    ]
    # content_tsv exists on PostgreSQL only and is not mapped (SQLite has no such
    # column); test_postgres_has_the_lexical_index checks it instead. HNSW indexes are
    # made per embedder at run time (models/store/vector_index.py), not by migrations.
    diff = [
        d
        for d in diff
        if not (d[0] == "remove_column" and d[3].name == "content_tsv")
        and not (d[0] == "remove_index" and d[1].name.startswith("ix_memories_hnsw_"))
    ]
    assert diff == []


def _columns(url: str, table: str) -> set[str]:
    return {c["name"] for c in inspect(get_engine(url)).get_columns(table)}


NEXT_COLUMNS = {"embedding_next", "embedding_next_model", "embedding_next_dim"}


def _insert_memory(url: str) -> None:
    with get_engine(url).begin() as conn:
        conn.execute(
            text(
                "INSERT INTO memories (id, user_id, content, category, importance, confidence,"
                " tier, status, sensitive, keywords, access_count, created_at, accessed_at)"
                " VALUES ('mem_1', 'u1', 'User moved to Lisbon in March', 'fact', 0.8, 1.0,"
                " 'candidate', 'active', false, '[]', 1, :t, :t)"
            ),
            {"t": "2026-03-01 12:00:00+00:00"},
        )


def _contents(url: str) -> list[str]:
    with get_engine(url).connect() as conn:
        return list(conn.execute(text("SELECT content FROM memories")).scalars())


def test_sqlite_0002_adds_and_removes_the_next_columns_keeping_rows(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    migrate.upgrade(url, "0001")
    _insert_memory(url)
    assert not _columns(url, "memories") & NEXT_COLUMNS
    migrate.upgrade(url)
    assert _columns(url, "memories") >= NEXT_COLUMNS
    assert "content_tsv" not in _columns(url, "memories")
    assert _contents(url) == ["User moved to Lisbon in March"]
    migrate.downgrade(url, "0001")
    assert not _columns(url, "memories") & NEXT_COLUMNS
    assert _contents(url) == ["User moved to Lisbon in March"]


def _toasted_after_a_long_memory(url: str) -> int:
    """Chunks in the memories' TOAST table after one memory with a 384-dimension
    embedding (1.5 KB) and 1 KB of text (hex, which hardly compresses) is written."""
    vector = "[" + ",".join(str(0.001 * (i + 1)) for i in range(384)) + "]"
    content = " ".join(sha256(bytes([i])).hexdigest() for i in range(16))
    with get_engine(url).begin() as conn:
        conn.execute(
            text(
                "INSERT INTO memories (id, user_id, content, category, importance, confidence,"
                " tier, status, sensitive, keywords, access_count, created_at, accessed_at,"
                " embedding)"
                " VALUES ('mem_long', 'u1', :content, 'fact', 0.8, 1.0,"
                " 'candidate', 'active', false, '[]', 1, :t, :t, CAST(:v AS vector))"
            ),
            {"content": content, "t": "2026-03-01 12:00:00+00:00", "v": vector},
        )
        toast = conn.execute(
            text("SELECT reltoastrelid::regclass::text FROM pg_class WHERE relname = 'memories'")
        ).scalar_one()
        chunks = int(conn.execute(text(f"SELECT count(*) FROM {toast}")).scalar_one())
        conn.execute(text("DELETE FROM memories WHERE id = 'mem_long'"))
    return chunks


def test_postgres_has_the_lexical_index_and_0002_goes_down_and_up(pg_url: str) -> None:
    import psycopg

    scratch = "memlane_migration_0002_test"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{scratch}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{scratch}"')
    url = pg_url.rsplit("/", 1)[0] + "/" + scratch
    try:
        migrate.upgrade(url, "0001")
        _insert_memory(url)
        migrate.upgrade(url, "0002")
        assert _columns(url, "memories") >= NEXT_COLUMNS | {"content_tsv"}
        assert _toasted_after_a_long_memory(url) > 0  # the layout 0004 changes
        with get_engine(url).connect() as conn:
            # the generated column was filled for the row that existed before 0002
            assert (
                conn.execute(
                    text(
                        "SELECT count(*) FROM memories WHERE content_tsv @@ "
                        "to_tsquery('english', 'lisbon | moving')"
                    )
                ).scalar_one()
                == 1
            )
            index = conn.execute(
                text("SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_memories_content_tsv'")
            ).scalar_one()
        assert "USING gin (content_tsv)" in index
        migrate.upgrade(url)
        with get_engine(url).connect() as conn:
            # 0003: the keyword index covers memory_id; the GIN index is gone
            names = set(conn.execute(text("SELECT indexname FROM pg_indexes")).scalars())
        assert "ix_memory_keywords_user_keyword_memory" in names
        assert "ix_memories_content_tsv" not in names
        # 0004: a 2.5 KB row keeps its embedding in the row; before, it went to TOAST
        assert _toasted_after_a_long_memory(url) == 0
        migrate.downgrade(url, "0001")
        assert not _columns(url, "memories") & (NEXT_COLUMNS | {"content_tsv"})
        assert _contents(url) == ["User moved to Lisbon in March"]
        migrate.upgrade(url)
        assert migrate.is_up_to_date(url)
    finally:
        get_engine(url).dispose()
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{scratch}" WITH (FORCE)')
