from __future__ import annotations

import json
from datetime import UTC, datetime
from hashlib import sha256
from pathlib import Path

from sqlalchemy import inspect, select, text

from memlane.models import migrate
from memlane.models.db import get_engine, unit_of_work
from memlane.models.schemas import MemoryCreate
from memlane.models.store.memories import events as memory_events
from memlane.models.store.memories import memories
from memlane.models.store.users import context_items
from memlane.models.tables import Base, MemoryEventRow
from tests.integration.conftest import PG_ADMIN_URL, PG_DB


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

    scratch = f"{PG_DB}_migration"
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
    # made per embedder at run time (models/store/memories/vector_index.py), not by migrations.
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
        columns = {c["name"] for c in inspect(conn).get_columns("memories")}
        later = ", confirmed_at, ref" if "ref" in columns else ""  # migration 0005
        values = ", :t, 999999" if later else ""  # a ref no other memory has
        conn.execute(
            text(
                "INSERT INTO memories (id, user_id, content, category, importance, confidence,"
                " tier, status, sensitive, keywords, access_count, created_at, accessed_at,"
                f" embedding{later})"
                " VALUES ('mem_long', 'u1', :content, 'fact', 0.8, 1.0,"
                f" 'candidate', 'active', false, '[]', 1, :t, :t, CAST(:v AS vector){values})"
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

    scratch = f"{PG_DB}_migration_0002"
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
            # 0003: the keyword index covers memory_id (0010: and the sizes); no GIN index
            names = set(conn.execute(text("SELECT indexname FROM pg_indexes")).scalars())
        assert "ix_memory_keywords_user_keyword_sizes" in names
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


def _rows_before_0005(url: str) -> None:
    """A user's store as 0004 left it: a memory evidenced by message 3 of its conversation
    but whose accessed_at an assembly moved later, a hand-made memory, an episode dated
    when its store stage ran, and a procedure; another user's memory."""
    said = {seq: f"2026-01-0{seq + 1} 10:00:00+00:00" for seq in range(5)}
    stored = "2026-02-01 09:00:00+00:00"
    with get_engine(url).begin() as conn:
        conn.execute(
            text(
                "INSERT INTO conversations (id, user_id, message_count, assistant_count,"
                " extracted_to_seq, final, created_at, last_message_at)"
                " VALUES ('c1', 'u1', 5, 2, 4, false, :t, :t)"
            ),
            {"t": said[0]},
        )
        for seq, at in said.items():
            conn.execute(
                text(
                    "INSERT INTO messages (conversation_id, seq, role, content, content_sha256,"
                    " created_at) VALUES ('c1', :seq, 'user', 'hi', 'x', :at)"
                ),
                {"seq": seq, "at": at},
            )
        conn.execute(
            text(
                "INSERT INTO jobs (id, user_id, conversation_id, status, stage,"
                " window_start_seq, window_end_seq, new_from_seq, attempts, created_at,"
                " updated_at) VALUES ('job_1', 'u1', 'c1', 'done', 'store', 0, 4, 0, 1, :t, :t)"
            ),
            {"t": stored},
        )
        memory = (
            "INSERT INTO memories (id, user_id, content, category, importance, confidence,"
            " tier, status, sensitive, keywords, access_count, created_at, accessed_at,"
            " source_conversation_id, evidence_seq) VALUES (:id, :user, 'x', 'fact', 0.5,"
            " 1.0, 'candidate', 'active', false, '[]', 2, :created, :accessed, :c, :seq)"
        )
        for values in [
            ("mem_b", "u1", said[1], stored, "c1", 3),  # evidenced by message 3
            ("mem_a", "u1", said[2], said[2], None, None),  # added by hand
            ("mem_z", "u2", said[0], said[0], None, None),
        ]:
            keys = ("id", "user", "created", "accessed", "c", "seq")
            conn.execute(text(memory), dict(zip(keys, values, strict=True)))
        conn.execute(
            text(
                "INSERT INTO episodes (id, user_id, conversation_id, job_id, summary, topics,"
                " created_at) VALUES ('ep_1', 'u1', 'c1', 'job_1', 's', '[]', :t)"
            ),
            {"t": stored},
        )
        conn.execute(
            text(
                "INSERT INTO procedures (id, user_id, name, content, keywords, created_at)"
                " VALUES ('proc_1', 'u1', 'deploy', 'steps', '[]', :t)"
            ),
            {"t": said[0]},
        )


def _check_0005(url: str) -> None:
    migrate.upgrade(url, "0004")
    _rows_before_0005(url)
    migrate.upgrade(url, "0005")
    with get_engine(url).begin() as conn:  # mem_b made by job_1 from messages 1..3
        conn.execute(
            text(
                "UPDATE memories SET source_job_id = 'job_1', source_from_seq = 1,"
                " source_to_seq = 3 WHERE id = 'mem_b'"
            )
        )
    migrate.upgrade(url)
    with unit_of_work(url) as session:
        # 0007: each memory's history starts with its creation
        [made] = memory_events.history(session, "u1", "mem_b")
        assert (made.kind, made.actor) == ("created", "worker")
        assert made.at == datetime(2026, 1, 2, 10, tzinfo=UTC)  # its created_at
        assert made.detail == {
            "job_id": "job_1", "conversation_id": "c1", "from_seq": 1, "to_seq": 3
        }  # fmt: skip
        evidenced_by = select(MemoryEventRow.conversation_id).where(
            MemoryEventRow.memory_id == "mem_b"
        )
        assert session.scalars(evidenced_by).all() == ["c1"]  # what deleting c1 reads
        [by_hand] = memory_events.history(session, "u1", "mem_a")
        assert (by_hand.kind, by_hand.actor, by_hand.detail) == ("created", "unknown", {})
        assert [e.kind for e in memory_events.history(session, "u2", "mem_z")] == ["created"]
        b = memories.get(session, "u1", "mem_b")
        a = memories.get(session, "u1", "mem_a")
        # confirmed when message 3 was said, not when an assembly showed it
        assert b.confirmed_at == datetime(2026, 1, 4, 10, tzinfo=UTC)
        assert b.accessed_at == datetime(2026, 2, 1, 9, tzinfo=UTC)  # unchanged
        assert a.confirmed_at == a.created_at
        [episode] = context_items.recent_episodes(session, "u1")
        assert episode.created_at == datetime(2026, 1, 5, 10, tzinfo=UTC)  # message 4's time
        [procedure] = context_items.procedures(session, "u1")
        # one numbering per user, by creation: procedure, mem_b, mem_a, the episode
        assert (procedure.ref, b.ref, a.ref, episode.ref) == (1, 2, 3, 4)
        assert memories.get(session, "u2", "mem_z").ref == 1
        # new items continue the numbering
        added = memories.add(
            session,
            user_id="u1",
            memory=MemoryCreate(content="new"),
            keywords=frozenset(),
            embedding=None,
            embedding_model=None,
            now=datetime(2026, 3, 1, tzinfo=UTC),
        )
        assert added.ref == 5
    migrate.downgrade(url, "0004")
    migrate.upgrade(url)


def test_0005_and_0007_date_number_and_start_histories_on_sqlite(tmp_path: Path) -> None:
    _check_0005(f"sqlite:///{tmp_path / 'm.db'}")


def test_0005_and_0007_date_number_and_start_histories_on_postgres(pg_url: str) -> None:
    import psycopg

    scratch = f"{PG_DB}_migration_0005"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{scratch}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{scratch}"')
    url = pg_url.rsplit("/", 1)[0] + "/" + scratch
    try:
        _check_0005(url)
    finally:
        get_engine(url).dispose()
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{scratch}" WITH (FORCE)')


def _check_0006(url: str) -> None:
    """0006 takes "user" out of the keywords (not where the text says "users") and counts
    each user's keywords from the index."""
    migrate.upgrade(url, "0005")
    memory = (
        "INSERT INTO memories (id, user_id, content, category, importance, confidence,"
        " tier, status, sensitive, keywords, access_count, created_at, accessed_at,"
        " confirmed_at, ref) VALUES (:id, :user, :content, 'fact', 0.5, 1.0, 'candidate',"
        " :status, false, :keywords, 1, :t, :t, :t, :ref)"
    )
    rows = [
        ("m1", "u1", "User likes Java", "active", ["java", "like", "user"]),
        (
            "m2",
            "u1",
            "User's team builds tools for users",
            "deleted",
            ["build", "team", "tool", "user"],
        ),
        ("m3", "u1", "User dislikes Java", "superseded", ["dislik", "java", "user"]),
        ("m4", "u2", "User likes Java", "active", ["java", "like", "user"]),
    ]
    with get_engine(url).begin() as conn:
        for ref, (memory_id, user, content, status, words) in enumerate(rows, start=1):
            conn.execute(
                text(memory),
                {
                    "id": memory_id,
                    "user": user,
                    "content": content,
                    "status": status,
                    "keywords": json.dumps(words),
                    "ref": ref,
                    "t": "2026-01-01 00:00:00+00:00",
                },
            )
            for word in words:
                conn.execute(
                    text("INSERT INTO memory_keywords VALUES (:m, :k, :u)"),
                    {"m": memory_id, "k": word, "u": user},
                )
    migrate.upgrade(url)
    with unit_of_work(url) as session:
        assert memories.get(session, "u1", "m1").keywords == ["java", "like"]
        assert memories.get(session, "u1", "m2").keywords == ["build", "team", "tool", "user"]
        counts = dict(
            session.execute(
                text("SELECT keyword, memories FROM memory_keyword_counts WHERE user_id = 'u1'")
            ).all()
        )
    assert counts == {
        "java": 2,
        "like": 1,
        "dislik": 1,
        "build": 1,
        "team": 1,
        "tool": 1,
        "user": 1,
        "": 3,  # the memories indexed
    }
    # 0010: each posting carries its memory's keyword and topic set sizes (polarity
    # stems out), from the keywords 0006 left
    with unit_of_work(url) as session:
        sizes = set(
            session.execute(
                text("SELECT memory_id, keyword_count, topic_count FROM memory_keywords")
            ).all()
        )
    assert sizes == {("m1", 2, 1), ("m2", 4, 4), ("m3", 2, 1), ("m4", 2, 1)}
    migrate.downgrade(url, "0005")
    migrate.upgrade(url)


def test_0006_drops_the_subject_keyword_and_counts_keywords_on_sqlite(tmp_path: Path) -> None:
    _check_0006(f"sqlite:///{tmp_path / 'm.db'}")


def test_0006_drops_the_subject_keyword_and_counts_keywords_on_postgres(pg_url: str) -> None:
    import psycopg

    scratch = f"{PG_DB}_migration_0006"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{scratch}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{scratch}"')
    url = pg_url.rsplit("/", 1)[0] + "/" + scratch
    try:
        _check_0006(url)
    finally:
        get_engine(url).dispose()
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{scratch}" WITH (FORCE)')


def _check_0014(url: str) -> None:
    """0014 stores each memory's and message's language and re-keys the memories of
    other languages (postings and counts with them); English keywords stay."""
    migrate.upgrade(url, "0013")
    memory = (
        "INSERT INTO memories (id, user_id, content, category, importance, confidence,"
        " tier, status, sensitive, keywords, access_count, created_at, accessed_at,"
        " confirmed_at, ref) VALUES (:id, 'u1', :content, 'fact', 0.5, 1.0, 'candidate',"
        " 'active', false, :keywords, 1, :t, :t, :t, :ref)"
    )
    # keywords as the code before 0014 made them: English stemming of every text
    rows = [
        ("m1", "User likes Java", ["java", "like"]),
        (
            "m2",
            "Der Nutzer trinkt jeden Morgen grünen Tee",
            ["der", "grünen", "jeden", "morgen", "nutzer", "tee", "trinkt"],
        ),
        ("m3", "ユーザーは毎朝緑茶を飲みます", ["ユーザーは毎朝緑茶を飲みます"]),
    ]
    t = "2026-01-01 00:00:00+00:00"
    with get_engine(url).begin() as conn:
        for ref, (memory_id, content, words) in enumerate(rows, start=1):
            conn.execute(
                text(memory),
                {
                    "id": memory_id,
                    "content": content,
                    "keywords": json.dumps(words),
                    "ref": ref,
                    "t": t,
                },
            )
            for word in words:
                conn.execute(
                    text("INSERT INTO memory_keywords VALUES (:m, :k, 'u1', :n, :n)"),
                    {"m": memory_id, "k": word, "n": len(words)},
                )
        conn.execute(
            text(
                "INSERT INTO memory_keyword_counts (user_id, keyword, memories)"
                " SELECT user_id, keyword, count(*) FROM memory_keywords GROUP BY user_id, keyword"
            )
        )
        conn.execute(text("INSERT INTO memory_keyword_counts VALUES ('u1', '', 3)"))
        conn.execute(
            text(
                "INSERT INTO conversations (id, user_id, message_count, assistant_count,"
                " extracted_to_seq, final, created_at, last_message_at)"
                " VALUES ('c1', 'u1', 3, 0, -1, false, :t, :t)"
            ),
            {"t": t},
        )
        for seq, content in enumerate(
            ["Ich trinke jeden Morgen grünen Tee", "I drink green tea every morning", ""]
        ):
            conn.execute(
                text(
                    "INSERT INTO messages (conversation_id, seq, role, content,"
                    " content_sha256, created_at) VALUES ('c1', :seq, 'user', :c, '', :t)"
                ),
                {"seq": seq, "c": content, "t": t},
            )
    migrate.upgrade(url)
    with unit_of_work(url) as session:
        stored = {
            memory_id: (language, sorted(json.loads(words) if isinstance(words, str) else words))
            for memory_id, language, words in session.execute(
                text("SELECT id, language, keywords FROM memories")
            ).all()
        }
        postings = {
            (m, k)
            for m, k in session.execute(
                text("SELECT memory_id, keyword FROM memory_keywords")
            ).all()
        }
        counts = dict(
            session.execute(text("SELECT keyword, memories FROM memory_keyword_counts")).all()
        )
        languages = session.execute(text("SELECT language FROM messages ORDER BY seq")).scalars()
        assert list(languages) == ["de", "en", None]  # the purged message keeps none
    assert stored == {
        "m1": ("en", ["java", "like"]),
        "m2": ("de", ["de:grun", "de:morg", "de:tee", "de:trinkt"]),
        "m3": ("ja", ["ja:朝緑", "ja:毎朝", "ja:緑茶", "ja:飲"]),
    }
    assert postings == {(m, k) for m, (_, words) in stored.items() for k in words}
    assert counts == {**{k: 1 for _, words in stored.values() for k in words}, "": 3}
    migrate.downgrade(url, "0010")
    migrate.upgrade(url)


def test_0014_detects_languages_and_rekeys_on_sqlite(tmp_path: Path) -> None:
    _check_0014(f"sqlite:///{tmp_path / 'm.db'}")


def test_0014_detects_languages_and_rekeys_on_postgres(pg_url: str) -> None:
    import psycopg

    scratch = f"{PG_DB}_migration_0014"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{scratch}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{scratch}"')
    url = pg_url.rsplit("/", 1)[0] + "/" + scratch
    try:
        _check_0014(url)
    finally:
        get_engine(url).dispose()
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{scratch}" WITH (FORCE)')
