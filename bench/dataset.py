"""Synthetic but realistic memory stores, loaded fast (COPY on PostgreSQL, one executemany
on SQLite) into the real schema.

Per memory: a sentence built from a category template (tools, places, people, projects)
with a tail of 0–120 words drawn from a Zipf-distributed vocabulary, so lengths vary from
a few words to a paragraph and keywords overlap the way real ones do (a few common
words, a long tail); importance and confidence as the extractor assigns them; ages over
two years, accesses skewed to recent ones, access counts heavy-tailed; 3 pinned and up
to 20 verified memories per user; ~8% not active, 1% sensitive, 2% with an expiry. The
embedding comes from the configured embedder (hashing by default), the keywords from
memlane.pipeline.dedup.keywords, exactly as the store stage computes them.

A user id names its size and the generator's version (`bench-v1-10000`): a store already
loaded with that many memories is reused, a partial one is reloaded.

`asking`: the same memories as a chat's extractor leaves them (`bench-v1-asking-10000`):
said in conversations of TALK_LENGTH, one conversation's a second apart, and one in
ASKING_SHARE of them a question (its sentence ends in "?"), so assembly rule 4 reads and
walks replies (a question's reply is the memory said after it in its conversation).
"""

from __future__ import annotations

import io
import itertools
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

import numpy as np
from sqlalchemy import delete, func, insert, select

from bench.deduplicated import deduplicated_filter
from memlane.config.settings import load_settings
from memlane.models.db import get_engine, unit_of_work
from memlane.models.store.memories import refs
from memlane.models.store.users import context_items
from memlane.models.tables import (
    EpisodeRow,
    MemoryKeyword,
    MemoryKeywordCount,
    MemoryRow,
    ProcedureRow,
    SoulBlockRow,
    UserState,
)
from memlane.pipeline.dedup.keywords import keywords, topic_keywords
from memlane.pipeline.records import ExtractedEpisode
from memlane.workers.embedders import Embedder, get_embedder

VERSION = 1
DEDUP_VERSION = 2  # the deduplicated store, its vocabulary growing with it
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
PINNED, VERIFIED = 3, 20
TALK_LENGTH, ASKING_SHARE = 20, 0.2

_TECH = [
    "TypeScript",
    "Python",
    "Go",
    "Rust",
    "Kotlin",
    "Java",
    "Elixir",
    "Ruby",
    "PostgreSQL",
    "SQLite",
    "Redis",
    "Kafka",
    "RabbitMQ",
    "Celery",
    "Django",
    "FastAPI",
    "Flask",
    "React",
    "Vue",
    "Svelte",
    "Next.js",
    "Tailwind",
    "Docker",
    "Kubernetes",
    "Terraform",
    "Ansible",
    "AWS",
    "GCP",
    "Azure",
    "Lambda",
    "Vercel",
    "Netlify",
    "GraphQL",
    "gRPC",
    "Prometheus",
    "Grafana",
    "Sentry",
    "Datadog",
    "Airflow",
    "dbt",
    "Spark",
    "Pandas",
    "Polars",
    "NumPy",
    "PyTorch",
    "JAX",
    "Neovim",
    "VSCode",
    "Emacs",
    "tmux",
    "zsh",
    "Git",
    "Bazel",
    "Poetry",
    "uv",
    "pytest",
    "Playwright",
    "Cypress",
]
_AREA = [
    "frontend",
    "backend",
    "billing",
    "auth",
    "search",
    "onboarding",
    "analytics",
    "payments",
    "notifications",
    "mobile",
    "app",
    "data",
    "pipeline",
    "infrastructure",
    "testing",
    "CI",
    "deployments",
    "monitoring",
    "logging",
    "documentation",
    "the",
    "API",
    "the",
    "admin",
    "panel",
    "reporting",
    "caching",
    "migrations",
]
_CITY = [
    "Lisbon",
    "Porto",
    "Berlin",
    "Munich",
    "Paris",
    "Lyon",
    "Madrid",
    "Valencia",
    "London",
    "Leeds",
    "Dublin",
    "Oslo",
    "Stockholm",
    "Helsinki",
    "Warsaw",
    "Prague",
    "Vienna",
    "Zurich",
    "Milan",
    "Rome",
    "Athens",
    "Istanbul",
    "Cairo",
    "Nairobi",
    "Lagos",
    "Toronto",
    "Montreal",
    "Boston",
    "Austin",
    "Denver",
    "Seattle",
    "Lima",
    "Bogota",
    "Santiago",
    "Tokyo",
    "Osaka",
    "Seoul",
    "Taipei",
    "Singapore",
    "Sydney",
    "Melbourne",
    "Auckland",
    "Mumbai",
    "Pune",
]
_JOB = [
    "backend engineer",
    "data scientist",
    "product manager",
    "designer",
    "SRE",
    "teacher",
    "nurse",
    "researcher",
    "founder",
    "consultant",
    "student",
    "analyst",
    "architect",
    "writer",
    "CTO",
]
_RELATION = [
    "wife",
    "husband",
    "partner",
    "daughter",
    "son",
    "dog",
    "cat",
    "sister",
    "brother",
    "manager",
]
_ACTIVITY = [
    "hiking",
    "climbing",
    "running",
    "cycling",
    "chess",
    "baking",
    "gardening",
    "reading sci-fi",
    "board games",
    "swimming",
    "photography",
    "learning Japanese",
    "playing guitar",
    "woodworking",
]
_TEMPLATES: dict[str, tuple[str, ...]] = {
    "preference": (
        "User prefers {tech} over {tech2} for {area}.",
        "User likes {activity} on weekends.",
        "User wants short answers with code first when working on {area}.",
        "User does not like {tech} for {area} anymore.",
    ),
    "fact": (
        "User lives in {city} and works as a {job} at {company}.",
        "User's {relation} is called {name}.",
        "User's deadline for the {area} work is in {month}.",
        "User is allergic to {food}.",
    ),
    "decision": (
        "User decided to move {area} from {tech} to {tech2}.",
        "User decided to keep {tech} for {area} until {month}.",
    ),
    "project": (
        "User is building {project} with {tech} and {tech2} for {area}.",
        "User's project {project} runs on {tech} in {city}.",
    ),
}
_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
]
_FOOD = ["peanuts", "shellfish", "gluten", "lactose", "sesame", "eggs", "soy", "kiwi"]
_SYLLABLES = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"]


def _pseudo_words(rng: random.Random, count: int) -> list[str]:
    words: set[str] = set()
    while len(words) < count:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


@dataclass(frozen=True)
class Vocabulary:
    names: list[str]
    companies: list[str]
    projects: list[str]
    tail: list[str]
    tail_weights: list[float]
    # Summed once: random.choices sums `weights` on every call (the same draws either way).
    tail_cum_weights: list[float]


@cache
def vocabulary(seed: int = 7, tail_size: int = 5000) -> Vocabulary:
    rng = random.Random(seed)
    words = _pseudo_words(rng, 1000 + tail_size)
    rng.shuffle(words)
    tail = words[1000:]
    # Zipf-Mandelbrot (1 / (rank + 20)): a few tail words are common (the most common in
    # about 1% of draws), most are rare.
    weights = [1.0 / (rank + 20) for rank in range(1, len(tail) + 1)]
    return Vocabulary(
        names=[w.title() for w in words[:300]],
        companies=[w.title() for w in words[300:500]],
        projects=[w for w in words[500:1000]],
        tail=tail,
        tail_weights=weights,
        tail_cum_weights=list(itertools.accumulate(weights)),
    )


def sentence(rng: random.Random, vocab: Vocabulary, category: str) -> str:
    template = rng.choice(_TEMPLATES[category])
    tech, tech2 = rng.sample(_TECH, 2)
    base = template.format(
        tech=tech,
        tech2=tech2,
        area=rng.choice(_AREA),
        activity=rng.choice(_ACTIVITY),
        city=rng.choice(_CITY),
        job=rng.choice(_JOB),
        company=rng.choice(vocab.companies),
        relation=rng.choice(_RELATION),
        name=rng.choice(vocab.names),
        month=rng.choice(_MONTHS),
        food=rng.choice(_FOOD),
        project=rng.choice(vocab.projects),
    )
    draw = rng.random()
    extra = 0 if draw < 0.35 else rng.randint(3, 12) if draw < 0.8 else rng.randint(12, 40)
    if rng.random() < 0.04:
        extra = rng.randint(60, 120)  # the occasional pasted paragraph
    if not extra:
        return base
    tail = rng.choices(vocab.tail, cum_weights=vocab.tail_cum_weights, k=extra)
    return f"{base[:-1]}, {' '.join(tail)}."


def _memory_rows(
    user_id: str,
    n: int,
    *,
    seed: int,
    keep: Callable[[str], bool] | None = None,
    vocab: Vocabulary | None = None,
    asking: bool = False,
) -> Iterator[dict[str, Any]]:
    """`keep`: whether a drawn sentence may be stored (others are drawn again);
    `asking`: the module docstring's."""
    rng = random.Random(seed)
    talk = random.Random(seed + 1)  # `asking`'s draws: the memories stay those of `seed`
    started = NOW
    vocab = vocab or vocabulary()
    categories = ("preference", "fact", "decision", "project")
    special = {i: "pinned" for i in range(PINNED)}
    special |= {PINNED + i: "verified" for i in range(min(VERIFIED, n // 100))}
    for i in range(n):
        category = rng.choices(categories, weights=(4, 3, 2, 2))[0]
        age = timedelta(
            days=rng.choice((rng.uniform(0, 30), rng.uniform(0, 180), rng.uniform(0, 730)))
        )
        created = NOW - age
        accessed = NOW - age * (rng.random() ** 3)  # most were seen again recently
        status_draw = rng.random()
        status = (
            "active"
            if status_draw < 0.92
            else "superseded"
            if status_draw < 0.97
            else "deleted"
            if status_draw < 0.99
            else "quarantined"
        )
        expires = None
        if rng.random() < 0.02:
            expires = NOW + timedelta(days=rng.uniform(-60, 60))
        content = sentence(rng, vocab, category)
        while keep is not None and not keep(content):
            content = sentence(rng, vocab, category)
        conversation = None
        if asking:
            if i % TALK_LENGTH == 0:
                started = created
            created = started + timedelta(seconds=i % TALK_LENGTH)
            conversation = f"{user_id}-talk{i // TALK_LENGTH}"
            if talk.random() < ASKING_SHARE:
                content = content[:-1] + "?"
        yield {
            "id": f"mem_{user_id}_{i:07d}",
            "user_id": user_id,
            "content": content,
            "source_conversation_id": conversation,
            "category": category,
            "importance": round(min(1.0, max(0.0, rng.gauss(0.65, 0.15))), 2),
            "confidence": 1.0 if rng.random() < 0.7 else 0.7,
            "tier": special.get(i, "candidate"),
            "status": "active" if i in special else status,
            "sensitive": i not in special and rng.random() < 0.01,
            "expires_at": None if i in special else expires,
            "access_count": min(500, int(rng.paretovariate(1.6))),
            "created_at": created,
            "confirmed_at": accessed,
            "accessed_at": accessed,
            "ref": i + 1,
        }


def _batches(rows: Iterator[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


@cache
def _deduplicated_rows(user_id: str, size: int) -> tuple[dict[str, Any], ...]:
    """Drawn once per process (~4 min of CPU at 100k), for both backends."""
    keep = deduplicated_filter().keep
    vocab = growing_vocabulary(size)
    return tuple(_memory_rows(user_id, size, seed=size, keep=keep, vocab=vocab))


def growing_vocabulary(size: int) -> Vocabulary:
    """The vocabulary of a store of `size` memories whose tail grows as real text's does
    (Heaps' law, V ≈ K·√tokens with K = 30, ~17 tokens a memory; at least the fixed
    5,000 words): ~12,000 tail words at 10k, ~39,000 at 100k. With the fixed tail, the
    rarest of 5,000 words is in ~40 of 100k memories and the median one in hundreds,
    where a real store's rare words (names, projects, places) stay rare."""
    return vocabulary(tail_size=max(5000, round(30 * math.sqrt(17 * size))))


def user_id_for(size: int, *, deduplicated: bool = False, asking: bool = False) -> str:
    if deduplicated:
        return f"bench-v{DEDUP_VERSION}-dedup-{size}"
    return f"bench-v{VERSION}-asking-{size}" if asking else f"bench-v{VERSION}-{size}"


def memory_count(url: str, user_id: str) -> int:
    with unit_of_work(url) as session:
        count = session.scalar(
            select(func.count()).select_from(MemoryRow).where(MemoryRow.user_id == user_id)
        )
    return int(count or 0)


def ensure_user(
    url: str, size: int, *, log: Any = print, deduplicated: bool = False, asking: bool = False
) -> str:
    """The user with `size` memories in this database, loading them if needed.
    `deduplicated`: a store as the store stage leaves it, no sentence a duplicate of
    another by dedup's rule (bench.deduplicated) and its vocabulary growing with it
    (`growing_vocabulary`), in a user of its own; `asking`: the module docstring's."""
    user_id = user_id_for(size, deduplicated=deduplicated, asking=asking)
    if memory_count(url, user_id) == size:
        return user_id
    embedder = get_embedder(load_settings())
    log(f"loading {size:,} memories for {user_id} ({embedder.name}) …")
    with unit_of_work(url) as session:
        for table in (
            MemoryKeywordCount,
            MemoryRow,
            EpisodeRow,
            ProcedureRow,
            SoulBlockRow,
            UserState,
        ):
            session.execute(delete(table).where(table.user_id == user_id))
        refs.allocate(session, user_id, size)  # memories take refs 1..size
    rows = (
        (dict(row) for row in _deduplicated_rows(user_id, size))
        if deduplicated
        else _memory_rows(user_id, size, seed=size, asking=asking)
    )
    for batch in _batches(rows, 5000):
        vectors = embedder.embed([row["content"] for row in batch])
        for row, vector in zip(batch, vectors, strict=True):
            row["keywords"] = sorted(keywords(row["content"]))
            row["embedding"] = vector
        if url.startswith("postgresql"):
            _copy_postgres(url, batch, embedder)
        else:
            _insert_sqlite(url, batch, embedder)
    with unit_of_work(url) as session:  # the frequencies the store keeps beside its index
        session.execute(
            insert(MemoryKeywordCount).from_select(
                ["user_id", "keyword", "memories"],
                select(MemoryKeyword.user_id, MemoryKeyword.keyword, func.count())
                .where(MemoryKeyword.user_id == user_id)
                .group_by(MemoryKeyword.user_id, MemoryKeyword.keyword),
            )
        )
        session.add(MemoryKeywordCount(user_id=user_id, keyword="", memories=size))
    _context_items(url, user_id)
    if url.startswith("postgresql"):
        # VACUUM too: a bulk load leaves the visibility map unset, and index-only scans
        # would visit every heap page until autovacuum comes by.
        autocommit = get_engine(url).execution_options(isolation_level="AUTOCOMMIT")
        with autocommit.connect() as conn:
            conn.exec_driver_sql("VACUUM ANALYZE memories")
            conn.exec_driver_sql("VACUUM ANALYZE memory_keywords")
            conn.exec_driver_sql("VACUUM ANALYZE memory_keyword_counts")
    return user_id


_PG_COLUMNS = [
    "id",
    "user_id",
    "content",
    "category",
    "importance",
    "confidence",
    "tier",
    "status",
    "sensitive",
    "expires_at",
    "keywords",
    "embedding",
    "embedding_model",
    "embedding_dim",
    "access_count",
    "created_at",
    "accessed_at",
    "confirmed_at",
    "ref",
    "source_conversation_id",
]


def _copy_postgres(url: str, batch: list[dict[str, Any]], embedder: Embedder) -> None:
    import json

    raw = get_engine(url).raw_connection()
    try:
        cursor = raw.cursor()
        with cursor.copy(f"COPY memories ({', '.join(_PG_COLUMNS)}) FROM STDIN") as copy:  # type: ignore[attr-defined]
            for row in batch:
                vector = "[" + ",".join(f"{v:.6g}" for v in row["embedding"]) + "]"
                copy.write_row(
                    (
                        *(row[c] for c in _PG_COLUMNS[:10]),
                        json.dumps(row["keywords"]),
                        vector,
                        embedder.name,
                        len(row["embedding"]),
                        row["access_count"],
                        row["created_at"],
                        row["accessed_at"],
                        row["confirmed_at"],
                        row["ref"],
                        row["source_conversation_id"],
                    )
                )
        columns = "memory_id, keyword, user_id, keyword_count, topic_count"
        with cursor.copy(f"COPY memory_keywords ({columns}) FROM STDIN") as copy:  # type: ignore[attr-defined]
            for row in batch:
                sizes = _sizes(row["keywords"])
                for word in row["keywords"]:
                    copy.write_row((row["id"], word[:100], row["user_id"], *sizes))
        raw.commit()
    finally:
        raw.close()


def _sizes(words: list[str]) -> tuple[int, int]:
    """A posting's sizes, as the store writes them (models.store.memories.keyword_index)."""
    kept = frozenset(words)
    return len(kept), len(topic_keywords(kept))


def _insert_sqlite(url: str, batch: list[dict[str, Any]], embedder: Embedder) -> None:
    rows = [
        {
            **row,
            "embedding": np.asarray(row["embedding"], dtype=np.float32).tolist(),
            "embedding_model": embedder.name,
            "embedding_dim": len(row["embedding"]),
        }
        for row in batch
    ]
    index = [
        {
            "memory_id": row["id"],
            "keyword": word[:100],
            "user_id": row["user_id"],
            "keyword_count": keyword_count,
            "topic_count": topic_count,
        }
        for row in batch
        for keyword_count, topic_count in (_sizes(row["keywords"]),)
        for word in row["keywords"]
    ]
    with unit_of_work(url) as session:
        session.execute(insert(MemoryRow), rows)
        session.execute(insert(MemoryKeyword), index)


def _context_items(url: str, user_id: str) -> None:
    """Two soul blocks, ten episodes and five procedures: every section of a context."""
    rng = random.Random(user_id)
    vocab = vocabulary()
    with unit_of_work(url) as session:
        context_items.set_soul_block(
            session,
            user_id=user_id,
            kind="identity",
            content="A backend engineer who works on data-heavy services; answers in English.",
            now=NOW,
        )
        context_items.set_soul_block(
            session,
            user_id=user_id,
            kind="style",
            content="Prefers concise answers with code first and no filler.",
            now=NOW,
        )
        for n in range(10):
            area = rng.choice(_AREA)
            context_items.save_episode(
                session,
                user_id=user_id,
                conversation_id=f"{user_id}-c{n}",
                job_id=f"{user_id}-job{n}",
                episode=ExtractedEpisode(
                    summary=f"Conversation about {area}: " + sentence(rng, vocab, "project"),
                    topics=[area, rng.choice(_TECH)],
                    outcome=sentence(rng, vocab, "decision") if n % 2 else None,
                ),
                created_at=NOW - timedelta(days=n),
            )
        for n in range(5):
            area = rng.choice(_AREA)
            context_items.add_procedure(
                session,
                user_id=user_id,
                name=f"release-{n}",
                content=f"To release {area}: run the tests, tag, deploy with {rng.choice(_TECH)}.",
                keywords=keywords(f"release {area} deploy"),
                now=NOW,
            )


def queries(count: int, *, seed: int = 11) -> list[str]:
    """Questions a chat app might assemble for: about tools, places, projects."""
    rng = random.Random(seed)
    vocab = vocabulary()
    forms = (
        "What does the user prefer for {area}?",
        "Which tools does the user use with {tech}?",
        "Where does the user live and work?",
        "What is the status of the {project} project?",
        "Help me plan the {area} migration to {tech}.",
    )
    return [
        rng.choice(forms).format(
            area=rng.choice(_AREA), tech=rng.choice(_TECH), project=rng.choice(vocab.projects)
        )
        for _ in range(count)
    ]


def new_memory_texts(count: int, *, seed: int = 13, vocab: Vocabulary | None = None) -> list[str]:
    """Memories as an extractor would propose them: same generator, another seed (some are
    near-duplicates of stored ones by construction, most are new)."""
    rng = random.Random(seed)
    vocab = vocab or vocabulary()
    categories = ("preference", "fact", "decision", "project")
    return [sentence(rng, vocab, rng.choice(categories)) for _ in range(count)]


def dump_sample(url: str, user_id: str, limit: int = 5) -> str:
    with unit_of_work(url) as session:
        rows = session.scalars(
            select(MemoryRow.content).where(MemoryRow.user_id == user_id).limit(limit)
        )
        out = io.StringIO()
        for content in rows:
            out.write(f"- {content}\n")
    return out.getvalue()
