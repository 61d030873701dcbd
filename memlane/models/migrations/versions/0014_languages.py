"""languages: `memories.language` and `messages.language`, and non-English memories
re-keyed

Each memory's and message's language is detected (memlane.pipeline.language.detect) and
stored. A memory in a language other than English gets the keywords of its language
(memlane.pipeline.language.analyser: tagged "de:tee", its stopwords and stemmer, CJK
character pairs): its `keywords`, its postings in `memory_keywords` and its user's
`memory_keyword_counts` are rewritten. English memories keep their keywords as they are
(the English keywords did not change). A purged message (no text) keeps no language.
A progress bar on standard error counts the rows; docs/upgrade-notes.md gives the time on
a 100k-memory store.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from rich.console import Console
from rich.progress import Progress

from memlane.pipeline.dedup.keywords import keywords, topic_keywords
from memlane.pipeline.language.detect import detect_language

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

_BATCH = 2_000
_MAX_KEYWORD = 100  # memory_keywords.keyword's length

_memories = sa.table(
    "memories",
    sa.column("id", sa.String),
    sa.column("user_id", sa.String),
    sa.column("content", sa.Text),
    sa.column("keywords", sa.JSON),
    sa.column("language", sa.String),
)
_messages = sa.table(
    "messages",
    sa.column("id", sa.Integer),
    sa.column("content", sa.Text),
    sa.column("language", sa.String),
)
_postings = sa.table(
    "memory_keywords",
    sa.column("memory_id", sa.String),
    sa.column("keyword", sa.String),
    sa.column("user_id", sa.String),
    sa.column("keyword_count", sa.Integer),
    sa.column("topic_count", sa.Integer),
)
_counts = sa.table(
    "memory_keyword_counts",
    sa.column("user_id", sa.String),
    sa.column("keyword", sa.String),
    sa.column("memories", sa.Integer),
)


def upgrade() -> None:
    op.add_column("memories", sa.Column("language", sa.String(length=16), nullable=True))
    op.add_column("messages", sa.Column("language", sa.String(length=16), nullable=True))
    bind = op.get_bind()
    # A new store (the embedded default's first run) has no row to count: no bar.
    rows = sum(
        bind.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
        for table in (_memories, _messages)
    )
    with Progress(console=Console(stderr=True), transient=False, disable=rows == 0) as progress:
        rekeyed_users = _rekey_memories(bind, progress)
        _detect_messages(bind, progress)
    for user_id in sorted(rekeyed_users):
        _recount(bind, user_id)


def _batches(bind: sa.Connection, query: sa.Select[Any], key: Any) -> Iterator[Sequence[Any]]:
    """The rows of query in batches, by ascending key (keyset paging)."""
    last = None
    while True:
        page = query.order_by(key).limit(_BATCH)
        if last is not None:
            page = page.where(key > last)
        rows = bind.execute(page).all()
        if not rows:
            return
        yield rows
        last = rows[-1][0]


def _rekey_memories(bind: sa.Connection, progress: Progress) -> set[str]:
    total = bind.execute(sa.select(sa.func.count()).select_from(_memories)).scalar_one()
    task = progress.add_task("memories: language, keywords", total=total)
    users: set[str] = set()
    m = _memories.c
    query = sa.select(m.id, m.user_id, m.content, m.keywords)
    for rows in _batches(bind, query, m.id):
        languages: dict[str, list[str]] = {}
        changed: list[tuple[str, str, frozenset[str]]] = []
        for memory_id, user_id, content, stored in rows:
            language = detect_language(content)
            languages.setdefault(language, []).append(memory_id)
            if language != "en":
                words = keywords(content, language)
                if sorted(words) != sorted(stored or ()):
                    changed.append((memory_id, user_id, words))
        _set_languages(bind, _memories, languages)
        if changed:
            users.update(user_id for _, user_id, _ in changed)
            _rewrite(bind, changed)
        progress.advance(task, len(rows))
    return users


def _set_languages(bind: sa.Connection, table: sa.TableClause, ids: dict[str, list[Any]]) -> None:
    """One statement per language of a batch (most rows share one): far fewer than one
    a row."""
    for language, chosen in sorted(ids.items()):
        bind.execute(table.update().where(table.c.id.in_(chosen)).values(language=language))


def _rewrite(bind: sa.Connection, changed: list[tuple[str, str, frozenset[str]]]) -> None:
    """New keywords for memories, and new postings for those that had postings."""
    m, p = _memories.c, _postings.c
    bind.execute(
        _memories.update()
        .where(m.id == sa.bindparam("b_id"))
        .values(keywords=sa.bindparam("b_keywords", type_=sa.JSON)),
        [{"b_id": memory_id, "b_keywords": sorted(words)} for memory_id, _, words in changed],
    )
    ids = [memory_id for memory_id, _, _ in changed]
    indexed = set(
        bind.execute(sa.select(p.memory_id).where(p.memory_id.in_(ids)).distinct()).scalars()
    )
    bind.execute(_postings.delete().where(p.memory_id.in_(ids)))
    rows = [
        {
            "memory_id": memory_id,
            "keyword": word,
            "user_id": user_id,
            "keyword_count": len(words),
            "topic_count": len(topic_keywords(words)),
        }
        for memory_id, user_id, words in changed
        if memory_id in indexed
        for word in sorted({w[:_MAX_KEYWORD] for w in words})
    ]
    if rows:
        bind.execute(_postings.insert(), rows)


def _recount(bind: sa.Connection, user_id: str) -> None:
    """A user's keyword counts again from the postings (models/store/memories/keyword_index)."""
    p = _postings.c
    bind.execute(_counts.delete().where(_counts.c.user_id == user_id))
    words = sa.select(p.user_id, p.keyword, sa.func.count()).where(p.user_id == user_id)
    bind.execute(
        _counts.insert().from_select(
            ["user_id", "keyword", "memories"], words.group_by(p.user_id, p.keyword)
        )
    )
    total = sa.select(p.user_id, sa.literal(""), sa.func.count(sa.distinct(p.memory_id))).where(
        p.user_id == user_id
    )
    bind.execute(
        _counts.insert().from_select(["user_id", "keyword", "memories"], total.group_by(p.user_id))
    )


def _detect_messages(bind: sa.Connection, progress: Progress) -> None:
    g = _messages.c
    total = bind.execute(sa.select(sa.func.count()).select_from(_messages)).scalar_one()
    task = progress.add_task("messages: language", total=total)
    for rows in _batches(bind, sa.select(g.id, g.content), g.id):
        languages: dict[str, list[int]] = {}
        for message_id, content in rows:
            if content:
                languages.setdefault(detect_language(content), []).append(message_id)
        _set_languages(bind, _messages, languages)
        progress.advance(task, len(rows))


def downgrade() -> None:
    # The keywords of non-English memories stay as re-keyed: 0010's code reads any keyword
    # set, and re-deriving the old English-only ones would only make dedup worse.
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("language")
    with op.batch_alter_table("memories") as batch:
        batch.drop_column("language")
