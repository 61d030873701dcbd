"""SQLAlchemy 2 typed tables. The schema itself is created only by Alembic migrations.

Over 400 lines: one declarative Base and every table on it, with the column types they
share (`Embedding`, `UTCDateTime`), so the schema reads in one place, as Alembic's
autogenerate and the migrations compare it; each table is a short class.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator, TypeEngine


class Embedding(TypeDecorator[list[float]]):
    """pgvector `vector` on PostgreSQL, a float32 blob on SQLite.

    The column has no fixed dimension: the model and dimension are recorded beside each
    vector, and a store holds one model at a time (see `memlane reembed`).
    """

    impl = LargeBinary
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(Vector())
        return dialect.type_descriptor(LargeBinary())

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        if dialect.name == "postgresql":
            return [float(x) for x in value]  # pgvector's own type formats it
        return np.asarray(value, dtype=np.float32).tobytes()

    def process_result_value(self, value: Any, dialect: Dialect) -> list[float] | None:
        if value is None:
            return None
        if dialect.name == "postgresql":
            return [float(x) for x in value]  # already parsed by pgvector's type
        return list(map(float, np.frombuffer(value, dtype=np.float32)))


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on both backends (SQLite drops the zone otherwise)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the store; pass an aware UTC datetime")
        return value.astimezone(UTC)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)  # type: ignore[no-any-return]
        return value.astimezone(UTC)  # type: ignore[no-any-return]


class Base(DeclarativeBase):
    """Declarative base of every memlane table."""


UTC_DT = UTCDateTime()
# Metadata (memlane.pipeline.metadata): JSONB on PostgreSQL, for its GIN index and `@>`;
# JSON text on SQLite, read with json_each (models/store/metadata_sql.py).
METADATA_JSON = JSON().with_variant(JSONB(), "postgresql")


def _metadata_column() -> Mapped[dict[str, Any]]:
    return mapped_column("metadata", METADATA_JSON, default=dict, server_default=text("'{}'"))


class Conversation(Base):
    __tablename__ = "conversations"

    id: Mapped[str] = mapped_column(String(200), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(200), index=True)
    # The agent the user talks to in it, when the transcript names one (migration 0015).
    agent_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    message_count: Mapped[int] = mapped_column(Integer, default=0)
    assistant_count: Mapped[int] = mapped_column(Integer, default=0)
    # Highest message seq already covered by an extraction job (-1: none yet).
    extracted_to_seq: Mapped[int] = mapped_column(Integer, default=-1)
    final: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTC_DT)
    last_message_at: Mapped[datetime] = mapped_column(UTC_DT, index=True)
    meta: Mapped[dict[str, Any]] = _metadata_column()  # `metadata` is the Base's


class Message(Base):
    __tablename__ = "messages"
    __table_args__ = (
        UniqueConstraint("conversation_id", "seq", name="uq_messages_conversation_seq"),
        Index(
            "uq_messages_conversation_external_id",
            "conversation_id",
            "external_id",
            unique=True,
        ),
        # what retention reads: messages whose text is still kept, by age
        Index(
            "ix_messages_kept_created",
            "created_at",
            postgresql_where=text("purged_at IS NULL"),
            sqlite_where=text("purged_at IS NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    conversation_id: Mapped[str] = mapped_column(
        String(200), ForeignKey("conversations.id", ondelete="CASCADE")
    )
    seq: Mapped[int] = mapped_column(Integer)
    external_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    role: Mapped[str] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(Text)
    content_sha256: Mapped[str] = mapped_column(String(64))  # '' once purged
    # ISO 639-1, given with the message or detected (memlane.pipeline.language.detect;
    # migration 0014); none for a message purged before 0014.
    language: Mapped[str | None] = mapped_column(String(16), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTC_DT)
    # When retention purged its text (models/store/users/retention.py): the row stays, content
    # and hash emptied, so the position is known and a re-sent transcript skips it.
    purged_at: Mapped[datetime | None] = mapped_column(UTC_DT, nullable=True)


class Job(Base):
    """One extraction of one message window: extract → store. Nothing enqueued can vanish
    without this row saying what became of it."""

    __tablename__ = "jobs"
    __table_args__ = (
        UniqueConstraint("conversation_id", "window_end_seq", name="uq_jobs_conversation_end"),
        Index("ix_jobs_status_updated", "status", "updated_at"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(200), index=True)
    conversation_id: Mapped[str] = mapped_column(
        String(200), ForeignKey("conversations.id", ondelete="CASCADE")
    )
    status: Mapped[str] = mapped_column(String(16), default="queued")
    stage: Mapped[str] = mapped_column(String(16), default="extract")
    window_start_seq: Mapped[int] = mapped_column(Integer)
    window_end_seq: Mapped[int] = mapped_column(Integer)
    new_from_seq: Mapped[int] = mapped_column(Integer)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    model: Mapped[str | None] = mapped_column(String(200), nullable=True)
    tokens_in: Mapped[int | None] = mapped_column(Integer, nullable=True)
    tokens_out: Mapped[int | None] = mapped_column(Integer, nullable=True)
    cost_usd: Mapped[float | None] = mapped_column(Float, nullable=True)
    latency_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    # Extracted memories not stored because the user forgot or purged them (0008).
    suppressed: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # The validated extraction, kept between the extract and store stages (never on Redis).
    extraction: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTC_DT)
    updated_at: Mapped[datetime] = mapped_column(UTC_DT)
    started_at: Mapped[datetime | None] = mapped_column(UTC_DT, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTC_DT, nullable=True)


class MemoryRow(Base):
    __tablename__ = "memories"
    __table_args__ = (
        Index("ix_memories_user_status", "user_id", "status"),
        Index("ix_memories_user_accessed", "user_id", "accessed_at"),
        Index("ix_memories_user_created", "user_id", "created_at"),
        # a question's reply, the memory said next in its conversation (0017)
        Index(
            "ix_memories_user_conversation_said",
            "user_id",
            "source_conversation_id",
            "created_at",
            "ref",
        ),
        Index("ix_memories_user_importance", "user_id", "importance"),
        Index("ix_memories_user_tier", "user_id", "tier"),
        UniqueConstraint("user_id", "ref", name="uq_memories_user_ref"),
        Index("ix_memories_user_change", "user_id", "change_seq"),
        Index("ix_memories_metadata", "metadata", postgresql_using="gin"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(200))
    content: Mapped[str] = mapped_column(Text)
    category: Mapped[str] = mapped_column(String(16))
    importance: Mapped[float] = mapped_column(Float)
    confidence: Mapped[float] = mapped_column(Float)
    tier: Mapped[str] = mapped_column(String(16), default="candidate")
    status: Mapped[str] = mapped_column(String(16), default="active")
    sensitive: Mapped[bool] = mapped_column(Boolean, default=False)
    expires_at: Mapped[datetime | None] = mapped_column(UTC_DT, nullable=True)
    keywords: Mapped[list[str]] = mapped_column(JSON, default=list)
    # ISO 639-1: the language its keywords are of (memlane.pipeline.dedup.keywords;
    # migration 0014).
    language: Mapped[str | None] = mapped_column(String(16), nullable=True)
    embedding: Mapped[list[float] | None] = mapped_column(Embedding(), nullable=True)
    embedding_model: Mapped[str | None] = mapped_column(String(200), nullable=True)
    embedding_dim: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # A re-embedding in progress writes here; see models/store/memories/reembed.py.
    embedding_next: Mapped[list[float] | None] = mapped_column(Embedding(), nullable=True)
    embedding_next_model: Mapped[str | None] = mapped_column(String(200), nullable=True)
    embedding_next_dim: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # PostgreSQL also has `content_tsv` (a generated tsvector, migration 0002); it is not
    # mapped here because SQLite has no such column. models/store/reads/assembly.py ranks
    # candidates with it. An HNSW index per embedder may exist too (store/memories/vector_index.py).
    # Confirmations: 1 + each later, distinct piece of evidence (dedup bumps).
    access_count: Mapped[int] = mapped_column(Integer, default=1)
    # When the stating message was said.
    created_at: Mapped[datetime] = mapped_column(UTC_DT)
    # When the memory was last stated or confirmed: a message's time, never processing
    # time. `scored` takes recency from here (migration 0005).
    confirmed_at: Mapped[datetime] = mapped_column(UTC_DT)
    # When it was last stated, confirmed or shown in a context: HTM's access order, for
    # the `recent` strategy and diagnostics; never a signal of `scored`.
    accessed_at: Mapped[datetime] = mapped_column(UTC_DT)
    # The user's short id of the item (store/memories/refs.py), shown in contexts.
    ref: Mapped[int] = mapped_column(Integer)
    # The user's change number of the last write to the row (store/users/change_feed.py).
    change_seq: Mapped[int] = mapped_column(BigInteger, default=0)
    superseded_by: Mapped[str | None] = mapped_column(String(40), nullable=True)
    source_conversation_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    source_job_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    source_from_seq: Mapped[int | None] = mapped_column(Integer, nullable=True)
    source_to_seq: Mapped[int | None] = mapped_column(Integer, nullable=True)
    evidence_seq: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # None: about the user, seen by every agent of theirs; else that agent's alone (0015).
    agent_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    meta: Mapped[dict[str, Any]] = _metadata_column()


class MemoryKeyword(Base):
    """Inverted keyword index: dedup candidates come from here, never a scan of the store."""

    __tablename__ = "memory_keywords"
    __table_args__ = (
        # Dedup reads a keyword's postings within a range of sizes (migration 0010);
        # retrieval's lexical read uses its (user_id, keyword) prefix and memory_id.
        Index(
            "ix_memory_keywords_user_keyword_sizes",
            "user_id",
            "keyword",
            "topic_count",
            "keyword_count",
            "memory_id",
        ),
    )

    memory_id: Mapped[str] = mapped_column(
        String(40), ForeignKey("memories.id", ondelete="CASCADE"), primary_key=True
    )
    keyword: Mapped[str] = mapped_column(String(100), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(200))
    # The memory's keyword set's size, and its topic set's (without the polarity stems):
    # the prefix filter's length filter runs on the postings (memlane.pipeline.dedup.prefix_filter).
    keyword_count: Mapped[int] = mapped_column(Integer)
    topic_count: Mapped[int] = mapped_column(Integer)


class MemoryKeywordCount(Base):
    """How many of the user's memories (every status) hold each keyword: the document
    frequencies of `memory_keywords`, kept in the same transactions. Dedup reads the rarest
    keywords' postings first (memlane.pipeline.dedup.prefix_filter)."""

    __tablename__ = "memory_keyword_counts"

    user_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    keyword: Mapped[str] = mapped_column(String(100), primary_key=True)
    memories: Mapped[int] = mapped_column(Integer)


class EpisodeRow(Base):
    __tablename__ = "episodes"
    __table_args__ = (
        Index("ix_episodes_user_created", "user_id", "created_at"),
        UniqueConstraint("user_id", "ref", name="uq_episodes_user_ref"),
        Index("ix_episodes_user_change", "user_id", "change_seq"),
        Index("ix_episodes_metadata", "metadata", postgresql_using="gin"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(200))
    conversation_id: Mapped[str] = mapped_column(String(200))
    job_id: Mapped[str | None] = mapped_column(String(40), nullable=True, unique=True)
    summary: Mapped[str] = mapped_column(Text)
    topics: Mapped[list[str]] = mapped_column(JSON, default=list)
    outcome: Mapped[str | None] = mapped_column(Text, nullable=True)
    # When the last message it summarises was said (migration 0005).
    created_at: Mapped[datetime] = mapped_column(UTC_DT)
    ref: Mapped[int] = mapped_column(Integer)
    change_seq: Mapped[int] = mapped_column(BigInteger, default=0)
    # The summary embedded by the store stage's embedder, for relevance to a query.
    embedding: Mapped[list[float] | None] = mapped_column(Embedding(), nullable=True)
    embedding_model: Mapped[str | None] = mapped_column(String(200), nullable=True)
    embedding_dim: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # The agent of its conversation, whose alone it is; None: shared (migration 0015).
    agent_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    meta: Mapped[dict[str, Any]] = _metadata_column()  # its conversation's


class SoulBlockRow(Base):
    __tablename__ = "soul_blocks"

    user_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    content: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(UTC_DT)
    change_seq: Mapped[int] = mapped_column(BigInteger, default=0)


class ProcedureRow(Base):
    __tablename__ = "procedures"
    __table_args__ = (
        UniqueConstraint("user_id", "name", name="uq_procedures_user_name"),
        UniqueConstraint("user_id", "ref", name="uq_procedures_user_ref"),
        Index("ix_procedures_user_change", "user_id", "change_seq"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(200), index=True)
    name: Mapped[str] = mapped_column(String(200))
    content: Mapped[str] = mapped_column(Text)
    keywords: Mapped[list[str]] = mapped_column(JSON, default=list)
    created_at: Mapped[datetime] = mapped_column(UTC_DT)
    ref: Mapped[int] = mapped_column(Integer)
    change_seq: Mapped[int] = mapped_column(BigInteger, default=0)


class UserState(Base):
    """One row per user: the next short id (`ref`) of the user's memories, episodes and
    procedures, which share one numbering so a short id names one item; and the user's
    change number (`version`), taken by every transaction that writes the user's
    memories, episodes, procedures or soul blocks (store/users/change_feed.py)."""

    __tablename__ = "user_state"

    user_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    next_ref: Mapped[int] = mapped_column(Integer, default=1)
    version: Mapped[int] = mapped_column(BigInteger, default=0)


class RemovedItem(Base):
    """An item of a user deleted outright (a soul block, a procedure), with the change
    number of its removal, so every process's working set drops it too."""

    __tablename__ = "removed_items"

    user_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    item_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    change_seq: Mapped[int] = mapped_column(BigInteger)


class MemoryEventRow(Base):
    """One change of a memory (migration 0007): what happened, when and by whom, and
    its detail (the job and messages it came from, the fields an edit changed). A
    purge deletes a memory's events but its `purged` one, so no content outlives it."""

    __tablename__ = "memory_events"
    __table_args__ = (
        Index("ix_memory_events_user_memory", "user_id", "memory_id", "id"),
        Index("ix_memory_events_conversation", "conversation_id"),
    )

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    user_id: Mapped[str] = mapped_column(String(200))
    memory_id: Mapped[str] = mapped_column(String(40))
    # The conversation whose messages evidenced a `created` or `confirmed` event (a job's).
    conversation_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    kind: Mapped[str] = mapped_column(String(24))
    actor: Mapped[str] = mapped_column(String(120))
    at: Mapped[datetime] = mapped_column(UTC_DT)
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class Erasure(Base):
    """A fence left by erasing a user (migration 0009): a context pack assembled for
    them before the erasure and saved after it, by another process's background
    writer, is refused (models/store/users/erasures.py). Keyed by a hash of the id, so the id
    itself is gone; the sweep lifts fences older than erasures.FENCE."""

    __tablename__ = "erasures"

    user_key: Mapped[str] = mapped_column(String(64), primary_key=True)  # sha256, hex
    erased_at: Mapped[datetime] = mapped_column(UTC_DT)


class UserSecret(Base):
    """A user's secret (migration 0008), made on the first purge: the key of their
    memories' fingerprints (pipeline/dedup/fingerprints.py). Erasing the user deletes it."""

    __tablename__ = "user_secrets"

    user_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    secret: Mapped[str] = mapped_column(String(64))  # 32 random bytes, hex
    created_at: Mapped[datetime] = mapped_column(UTC_DT)


class ApiKeyRow(Base):
    """An API key (migration 0013): only a keyed hash of its secret
    (memlane/service/keys/secrets.py), its name, scopes, user patterns and rate limit,
    and when it was made, expires, was last used (written at most once a minute per
    process) and was revoked. Rotating a key adds a row of the same name and gives the
    old one an expiry at the end of the grace period."""

    __tablename__ = "api_keys"
    __table_args__ = (Index("ix_api_keys_name", "name"),)

    id: Mapped[str] = mapped_column(String(12), primary_key=True)  # the key's public part
    name: Mapped[str] = mapped_column(String(60))
    key_hash: Mapped[str] = mapped_column(String(64))  # HMAC-SHA256, hex
    scopes: Mapped[list[str]] = mapped_column(JSON)
    users: Mapped[list[str]] = mapped_column(JSON)  # patterns; empty = every user
    rate_per_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    burst: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTC_DT)
    expires_at: Mapped[datetime | None] = mapped_column(UTC_DT, nullable=True)
    last_used_at: Mapped[datetime | None] = mapped_column(UTC_DT, nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(UTC_DT, nullable=True)


class MemoryFingerprint(Base):
    """What is left of a purged memory (migration 0008): its keywords and normalised
    text, each an HMAC under the user's secret, and its polarity; no content. A later
    extraction that duplicates it is not stored."""

    __tablename__ = "memory_fingerprints"
    __table_args__ = (Index("ix_memory_fingerprints_user", "user_id"),)

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    user_id: Mapped[str] = mapped_column(String(200))
    memory_id: Mapped[str] = mapped_column(String(40))  # the purged memory's id
    keywords: Mapped[list[str]] = mapped_column(JSON)
    text_hash: Mapped[str] = mapped_column(String(64))
    polarity: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTC_DT)


class ContextPackRow(Base):
    __tablename__ = "context_packs"
    __table_args__ = (Index("ix_context_packs_user_assembled", "user_id", "assembled_at"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(200))
    assembled_at: Mapped[datetime] = mapped_column(UTC_DT)
    body: Mapped[dict[str, Any]] = mapped_column(JSON)


class WebhookRow(Base):
    """A webhook subscription (migration 0012): where to POST which events, for which
    users (a glob over user ids, None: all), signed with its secret."""

    __tablename__ = "webhooks"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    url: Mapped[str] = mapped_column(Text)
    events: Mapped[list[str]] = mapped_column(JSON)
    users: Mapped[str | None] = mapped_column(String(200), nullable=True)
    # the HMAC key of its signatures: kept as is, since every delivery is signed with it
    secret: Mapped[str] = mapped_column(String(64))
    include_content: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTC_DT)


class WebhookDeliveryRow(Base):
    """One event owed to one subscription (migration 0012), written in the transaction of
    the event itself: `pending` until a 2xx, `dead` after the last attempt or a refusal.
    The body holds ids only; a subscription that asks for content gets it read at send
    time, so a purge or an erasure leaves nothing here to send."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        UniqueConstraint("webhook_id", "event_id", name="uq_webhook_deliveries_event"),
        Index("ix_webhook_deliveries_due", "status", "next_attempt_at"),
        Index("ix_webhook_deliveries_user", "user_id"),
    )

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    webhook_id: Mapped[str] = mapped_column(
        String(40), ForeignKey("webhooks.id", ondelete="CASCADE")
    )
    event_id: Mapped[str] = mapped_column(String(40))
    event_type: Mapped[str] = mapped_column(String(32))
    user_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    occurred_at: Mapped[datetime] = mapped_column(UTC_DT)
    data: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTC_DT)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    response_status: Mapped[int | None] = mapped_column(Integer, nullable=True)
    delivered_at: Mapped[datetime | None] = mapped_column(UTC_DT, nullable=True)
