"""The assembler's reads: the few index-backed queries behind one context.

One statement on PostgreSQL: the UNION of the ids of pinned and verified items; the
best by the chosen strategy (`strategy_top_k` per order, through the per-user btree
indexes); the vector top-k against the query (ordered by `embedding::vector(dim) <=> q`
under the user's and the embedder's own conditions, so the user's HNSW index serves it
when there is one, see models/store/memories/vector_index.py, and the exact per-user scan
otherwise); and the lexical top-k (the user's memories sharing the most of the query's
keywords, an index-only scan of `memory_keywords`); then those rows, each once, with the
cosine and the ts_rank_cd of the query against `content_tsv`, so embeddings never leave
the database on this path and only the candidates are ranked. `read_for_assembly` sends
it with the read of soul blocks, episodes and procedures in one round trip, outside the
ORM (models/pipelined.py).

SQLite: the same parts without the vector one (cosines are computed in numpy over the
user's vectors); the lexical score is BM25 over the candidates' keywords
(`memlane.pipeline.ranking.lexical.bm25_scores`).

Cosines are only computed between vectors of one embedder: a vector is compared with the
query vector of its own (model, dim). When candidates carry vectors of a model no query
vector was given for (a `memlane reembed` in progress), `embed_for` is asked for the
query's vector in that model and a second vector top-k is read for it.

One module of ~640 lines: the PostgreSQL statement and the SQLite read are two forms of
one read whose parts, limits and safety filter must stay the same (tests compare them),
so they are kept side by side.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import lru_cache
from itertools import count
from typing import Any

import numpy as np
from pgvector import Vector as PgVector
from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    ColumnElement,
    Float,
    LargeBinary,
    String,
    and_,
    bindparam,
    case,
    cast,
    false,
    func,
    literal_column,
    null,
    or_,
    select,
    type_coerce,
    union,
    union_all,
)
from sqlalchemy.orm import Session

from memlane.models.db import autocommit_engine, read_unit
from memlane.models.pipelined import CompiledRead, compile_read, run_reads
from memlane.models.store import metadata_sql
from memlane.models.store.reads.replies import replies_statement
from memlane.models.store.rows import stored_record
from memlane.models.store.users.context_items import (
    ContextItems,
    context_items,
    items_from_rows,
    items_statement,
)
from memlane.models.tables import MemoryKeyword, MemoryRow
from memlane.pipeline.dedup.keywords import keywords
from memlane.pipeline.metadata.filters import Filter
from memlane.pipeline.ranking.lexical import bm25_scores
from memlane.pipeline.ranking.relevance import row_dots
from memlane.pipeline.records import MemoryRecord

# Enough for any question; a pasted essay as the query must not become a huge tsquery.
MAX_QUERY_TERMS = 32
# Postings past which a query word is too common to pick lexical candidates by (_selective).
MAX_WORD_POSTINGS = 500
_WORD = re.compile(r"[^\W_]+")
_STOP = frozenset({"or", "and", "not"})  # websearch_to_tsquery's operators

_COLUMNS = (
    MemoryRow.id,
    MemoryRow.user_id,
    MemoryRow.content,
    MemoryRow.category,
    MemoryRow.importance,
    MemoryRow.confidence,
    MemoryRow.tier,
    MemoryRow.status,
    MemoryRow.sensitive,
    MemoryRow.expires_at,
    MemoryRow.access_count,
    MemoryRow.created_at,
    MemoryRow.confirmed_at,
    MemoryRow.accessed_at,
    MemoryRow.ref,
    MemoryRow.embedding_model,
    MemoryRow.embedding_dim,
    MemoryRow.agent_id,
)

# A typed NULL: in a UNION, PostgreSQL would otherwise read an untyped one as text.
_NULL_FLOAT: Any = cast(null(), Float)

EmbedFor = Callable[[str, int], Sequence[float] | None]


@dataclass(frozen=True, slots=True)
class QueryVector:
    """The query embedded by one embedder (its stored name, e.g. "hashing-256")."""

    model: str
    vector: Sequence[float]


@dataclass(frozen=True, slots=True)
class AssemblyCandidates:
    memories: list[MemoryRecord]
    relevance: dict[str, float]  # cosine with the query, for memories that have one
    lexical: dict[str, float]  # raw ts_rank_cd (PostgreSQL) or BM25 (SQLite), > 0 only
    retrieval_mode: str


def _visible(
    include_sensitive: bool, where: Filter | None = None, postgres: bool = False
) -> list[ColumnElement[bool]]:
    """The safety filter of every read here, and the caller's metadata filter `where`;
    parameters `user_id`, `now` and `agent_id` (pipeline.scope: the shared memories and
    that agent's; NULL, no agent, matches none)."""
    conditions: list[ColumnElement[bool]] = [
        MemoryRow.user_id == bindparam("user_id"),
        or_(MemoryRow.agent_id.is_(None), MemoryRow.agent_id == bindparam("agent_id")),
        MemoryRow.status == "active",
        or_(MemoryRow.expires_at.is_(None), MemoryRow.expires_at > bindparam("now")),
    ]
    if not include_sensitive:
        conditions.append(MemoryRow.sensitive == false())
    if where is not None:
        dialect = "postgresql" if postgres else "sqlite"
        conditions.append(metadata_sql.condition(MemoryRow.meta, where, dialect=dialect))
    return conditions


def _strategy_orders(strategy: str) -> list[Any]:
    if strategy == "recent":
        return [MemoryRow.accessed_at.desc()]
    if strategy == "important":
        return [MemoryRow.importance.desc()]
    if strategy == "balanced":
        # importance / (1 + age) is not index-friendly; its best lie among the most
        # important and the newest.
        return [MemoryRow.importance.desc(), MemoryRow.created_at.desc()]
    return [MemoryRow.importance.desc(), MemoryRow.accessed_at.desc()]


def _record(row: Any, at: dict[str, int]) -> MemoryRecord:
    """The MemoryRecord of one row; `at` maps a column name to its position in the row.
    Read by position: a Row's attribute access costs more than the whole record (figures
    in bench/README.md). Built by `rows.stored_record`."""
    return stored_record(
        {
            "id": row[at["id"]],
            "user_id": row[at["user_id"]],
            "content": row[at["content"]],
            "category": row[at["category"]],
            "importance": row[at["importance"]],
            "confidence": row[at["confidence"]],
            "tier": row[at["tier"]],
            "status": row[at["status"]],
            "sensitive": row[at["sensitive"]],
            "expires_at": row[at["expires_at"]],
            "keywords": frozenset(),
            "access_count": row[at["access_count"]],
            "created_at": row[at["created_at"]],
            "confirmed_at": row[at["confirmed_at"]],
            "accessed_at": row[at["accessed_at"]],
            "ref": row[at["ref"]],
            "source_conversation_id": None,
            "source_job_id": None,
            "evidence_seq": None,
            "agent_id": row[at["agent_id"]],
        }
    )


def websearch_terms(query: str) -> str | None:
    """The query's words joined by " or ", for websearch_to_tsquery: any word matches
    (plainto_tsquery would demand all of them). Only runs of letters and digits are
    kept, so no user text is read as query syntax; None when no word is left."""
    words = [w for w in _WORD.findall(query.casefold()) if w not in _STOP]
    unique = list(dict.fromkeys(words))[:MAX_QUERY_TERMS]
    return " or ".join(unique) if unique else None


def _is(dim: int) -> ColumnElement[bool]:
    """The query vector's embedder (parameters `vmodel`, `vdim`), inlined as literals at
    execution: the planner can use a partial index (WHERE embedding_model = '…' AND
    embedding_dim = …) only when it can prove that predicate from the query, which it
    cannot from bound parameters under a generic plan."""
    return and_(
        MemoryRow.embedding_model == bindparam("vmodel", literal_execute=True),
        MemoryRow.embedding_dim == bindparam("vdim", dim, literal_execute=True),
    )


def _is_model(model: str, dim: int) -> ColumnElement[bool]:
    return and_(MemoryRow.embedding_model == model, MemoryRow.embedding_dim == dim)


def _distance(dim: int, q: Any) -> Any:
    """Cosine distance in the form the HNSW indexes are built on
    (models/store/memories/vector_index.py)."""
    return cast(MemoryRow.embedding, Vector(dim)).op("<=>", return_type=Float)(q)


@dataclass(frozen=True, slots=True)
class CandidateQuery:
    """What one assembly asks the store for: `top_k` by cosine, `strategy_top_k`
    (default `top_k`) per strategy order, `lexical_top_k` (default `top_k`) by shared
    keywords, among the user's memories visible at `now`.

    `approximate`: the vector top-k may come from an HNSW index (PostgreSQL). Its order
    is then the distance alone, as an index scan gives it; exact reads break distance
    ties by id, which keeps the index out but makes the k-th place deterministic.
    `max_word_postings`: see `_selective`."""

    now: datetime
    strategy: str
    query_vector: QueryVector | None
    top_k: int
    query_text: str | None = None
    strategy_top_k: int | None = None
    lexical_top_k: int | None = None
    include_sensitive: bool = False
    approximate: bool = False
    max_word_postings: int = MAX_WORD_POSTINGS
    agent_id: str | None = None  # whose memories besides the shared ones (pipeline.scope)
    where: Filter | None = None  # a metadata filter (pipeline.metadata.filters)


def assembly_candidates(
    session: Session,
    user_id: str,
    *,
    embed_for: EmbedFor | None = None,
    **query: Any,
) -> AssemblyCandidates:
    """The candidates of one assembly (`query`: the fields of CandidateQuery), read in
    `session`."""
    return candidates_in(session, user_id, CandidateQuery(**query), embed_for)


def candidates_in(
    session: Session, user_id: str, query: CandidateQuery, embed_for: EmbedFor | None
) -> AssemblyCandidates:
    postgres = session.get_bind().dialect.name == "postgresql"
    read = _CandidatesRead.plan(postgres, user_id, query)
    result = session.execute(_statement(read.shape), read.params)
    names = list(result.keys())
    return read.collect(names, result.all(), lambda follow_up: follow_up(session), embed_for)


def read_for_assembly(
    url: str,
    user_id: str,
    query: CandidateQuery,
    *,
    episode_limit: int,
    embed_for: EmbedFor | None = None,
) -> tuple[AssemblyCandidates, ContextItems]:
    """Everything one assembly reads: its candidates and `context_items`. On PostgreSQL
    both statements go in one round trip on an autocommit connection
    (models/pipelined.py); a second read follows only while a re-embedding is under
    way. SQLite reads them in one unit of work."""
    if not url.startswith("postgresql"):

        def read(session: Session) -> tuple[AssemblyCandidates, ContextItems]:
            candidates = candidates_in(session, user_id, query, embed_for)
            items = context_items(
                session, user_id, episode_limit=episode_limit, agent_id=query.agent_id
            )
            return candidates, items

        return read_unit(url, read)
    plan = _CandidatesRead.plan(True, user_id, query)
    model = plan.vector_model
    candidates_sql = _pg_sql(plan.shape, user_id if model else None, model)
    items_sql = _items_sql(episode_limit)
    (names, rows), (_, item_rows) = run_reads(
        autocommit_engine(url),
        [
            (candidates_sql, plan.pg_params()),
            (items_sql, {"user_id": user_id, "agent_id": query.agent_id}),
        ],
    )
    candidates = plan.collect(names, rows, lambda follow_up: read_unit(url, follow_up), embed_for)
    return candidates, items_from_rows(item_rows)


def read_replies(
    url: str, user_id: str, query: CandidateQuery, askers: Sequence[str]
) -> dict[str, MemoryRecord]:
    """Each of `askers`' reply (models/store/reads/replies.py) that this read's filters
    pass (`_visible`): assembly rule 4's replies."""

    def read(session: Session) -> dict[str, MemoryRecord]:
        postgres = session.get_bind().dialect.name == "postgresql"
        visible = _visible(query.include_sensitive, query.where, postgres)
        params = {"user_id": user_id, "now": query.now, "agent_id": query.agent_id}
        result = session.execute(
            replies_statement(_COLUMNS, visible), {**params, "askers": list(askers)}
        )
        at = {name: i for i, name in enumerate(result.keys())}
        return {row[at["asker_id"]]: _record(row, at) for row in result.all()}

    return read_unit(url, read)


@lru_cache(maxsize=1024)
def _pg_sql(shape: _Shape, user_id: str | None, model: str | None) -> CompiledRead:
    """The candidates statement for psycopg, with the user and the embedder of a vector
    read inlined (`_is`): compiled once per process, shape and (for those) user.

    Its text is the user's own, so a pooled connection keeps the prepared statements of
    the last 100 users it read for (psycopg's `prepared_max`); any other user's read is
    planned again. A text shared by all users would be prepared once, but PostgreSQL's
    generic plan for it cannot use a user's HNSW index, which costs more than the
    planning (figures in bench/README.md)."""
    literals = {"user_literal": user_id, "vmodel": model} if model is not None else {}
    return compile_read(_statement(shape), literals)


@lru_cache(maxsize=16)
def _items_sql(episode_limit: int) -> CompiledRead:
    return compile_read(items_statement(episode_limit))


FollowUp = Callable[[Callable[[Session], None]], None]


@dataclass(frozen=True, slots=True)
class _CandidatesRead:
    """One candidates read: the statement's shape and parameters, and what turns its
    rows into `AssemblyCandidates`."""

    user_id: str
    query: CandidateQuery
    shape: _Shape
    params: dict[str, Any]
    terms: str | None

    @classmethod
    def plan(cls, postgres: bool, user_id: str, query: CandidateQuery) -> _CandidatesRead:
        query_vector = query.query_vector
        if query_vector is not None and not query_vector.vector:
            query = replace(query, query_vector=None)
            query_vector = None
        text = query.query_text
        terms = websearch_terms(text) if text else None
        words = sorted(keywords(text))[:MAX_QUERY_TERMS] if text else []
        vector = query_vector if postgres else None
        shape = _Shape(
            postgres=postgres,
            strategy=query.strategy,
            vector_dim=len(vector.vector) if vector is not None else None,
            approximate=query.approximate,
            lexical=postgres and terms is not None,
            words=len(words),
            include_sensitive=query.include_sensitive,
            where=query.where,
            where_key=repr(query.where) if query.where is not None else "",
        )
        params: dict[str, Any] = {
            "user_id": user_id,
            "agent_id": query.agent_id,
            "now": query.now,
            "strategy_k": query.strategy_top_k or query.top_k,
            "vector_k": query.top_k,
            "lexical_k": query.lexical_top_k or query.top_k,
            "cap": query.max_word_postings,
            "tsq": terms,
            **{f"w{i}": word for i, word in enumerate(words)},
        }
        if vector is not None:
            params.update(
                q=list(vector.vector),
                vmodel=vector.model,
                vdim=len(vector.vector),
                user_literal=user_id,
            )
        return cls(user_id, query, shape, params, terms)

    @property
    def vector_model(self) -> str | None:
        return self.params.get("vmodel")

    def pg_params(self) -> dict[str, Any]:
        """`params` as psycopg takes them: the query vector in pgvector's text form, as
        SQLAlchemy's Vector type sends it."""
        params = dict(self.params)
        if "q" in params:
            params["q"] = PgVector(params["q"]).to_text()
        return params

    def collect(
        self,
        names: Sequence[str],
        rows: Sequence[Sequence[Any]],
        follow_up: FollowUp,
        embed_for: EmbedFor | None,
    ) -> AssemblyCandidates:
        """The candidates from the statement's rows; `follow_up` runs the further reads
        (SQLite's cosines and BM25, a second embedder's top-k) on a session."""
        postgres, query, terms = self.shape.postgres, self.query, self.terms
        query_vector = query.query_vector
        found = _Found(
            _visible(query.include_sensitive, query.where, postgres),
            {"user_id": self.user_id, "now": query.now, "agent_id": query.agent_id},
            query.top_k,
        )
        found.add_rows(names, rows)
        mode = f"index:{query.strategy}"
        if terms is not None:
            mode = f"{'fts' if postgres else 'bm25'}+{mode}"
        if query_vector is not None:
            pg_mode = "pgvector-hnsw" if query.approximate else "pgvector-exact"
            mode = f"{pg_mode if postgres else 'numpy-cosine'}+{mode}"
            if not postgres:
                follow_up(lambda session: found.numpy_top_k(session, query_vector))
            other = found.other_model(query_vector)
            also = embed_for(*other) if other is not None and embed_for is not None else None
            if other is not None and also:
                second = QueryVector(other[0], also)
                if postgres:
                    lexical_col = (
                        _lexical_column() if self.shape.lexical else _NULL_FLOAT.label("lexical")
                    )
                    follow_up(lambda session: found.pg_top_k(session, second, lexical_col, terms))
                else:
                    follow_up(lambda session: found.numpy_top_k(session, second))
                mode += f"+also:{other[0]}"
        query_text = query.query_text
        if not postgres and query_text:
            follow_up(lambda session: found.bm25(session, query_text))
        return AssemblyCandidates(
            memories=sorted(found.memories.values(), key=lambda m: m.id),
            relevance=found.relevance,
            lexical=found.lexical,
            retrieval_mode=mode,
        )


@dataclass(frozen=True, slots=True)
class _Shape:
    """What the candidates statement's SQL depends on; values are bound per call."""

    postgres: bool
    strategy: str
    vector_dim: int | None  # of the query vector (PostgreSQL only); the model is bound
    approximate: bool
    lexical: bool  # ts_rank_cd of the query (PostgreSQL)
    words: int  # query keywords, for the lexical candidates
    include_sensitive: bool
    # its values are compiled in: a statement per filter, told apart by `where_key`
    # (filters of 1 and true are equal dataclasses)
    where: Filter | None = field(default=None, compare=False, hash=False)
    where_key: str = ""


def _lexical_column() -> Any:
    """ts_rank_cd of the query, computed only where the text matches it: the match test
    costs a fifth of the rank, and most candidates (by strategy, by vector) do not match;
    a non-match ranks 0, which counts as no lexical signal anyway."""
    tsq = func.websearch_to_tsquery(literal_column("'english'"), bindparam("tsq"))
    tsv: Any = literal_column("memories.content_tsv")
    return case((tsv.op("@@")(tsq), func.ts_rank_cd(tsv, tsq)), else_=None).label("lexical")


@lru_cache(maxsize=256)
def _statement(shape: _Shape) -> Any:
    """The one statement of a read (module docstring), built once per shape: building
    it took longer than running it (bench/README.md)."""
    conditions = _visible(shape.include_sensitive, shape.where, shape.postgres)
    names = count()

    def part(*more: Any) -> Any:
        # Parts select ids only: the cosine and the text rank are computed once per
        # candidate by the outer select below, not for every row a part scans.
        return select(MemoryRow.id).where(*conditions, *more)

    def top(select_: Any, order: Any, k: str, *, by_id: bool = True) -> Any:
        orders = (order, MemoryRow.id) if by_id else (order,)
        # Named: an anonymous subquery's name is drawn from os.urandom.
        subquery = select_.order_by(*orders).limit(bindparam(k)).subquery(f"top_{next(names)}")
        return subquery.select()

    relevance_col: Any = _NULL_FLOAT.label("relevance")
    parts: list[Any] = [part(MemoryRow.tier.in_(("pinned", "verified")))]
    parts += [top(part(), order, "strategy_k") for order in _strategy_orders(shape.strategy)]
    if shape.vector_dim is not None:
        dim = shape.vector_dim
        q = bindparam("q", type_=Vector())
        # The user inlined too, for the planner to prove a per-user HNSW index's predicate.
        mine = MemoryRow.user_id == bindparam("user_literal", literal_execute=True)
        vector_part = part(mine, _is(dim))
        parts.append(top(vector_part, _distance(dim, q), "vector_k", by_id=not shape.approximate))
        relevance_col = case((_is(dim), 1 - _distance(dim, q)), else_=None).label("relevance")
    if shape.words:
        words = [bindparam(f"w{i}", type_=String) for i in range(shape.words)]
        parts.append(part(MemoryRow.id.in_(_keyword_matches(words))))
    lexical_col = _lexical_column() if shape.lexical else _NULL_FLOAT.label("lexical")
    candidate_ids = union(*parts).subquery("candidate_ids")
    return select(*_COLUMNS, relevance_col, lexical_col).where(
        MemoryRow.id.in_(select(candidate_ids.c.id))
    )


def _pg_cosine(query_vector: QueryVector, q: Any) -> Any:
    # Only vectors of the query's own embedder are compared: `<=>` between vectors of
    # two dimensions is an error, and between two models of one dimension, nonsense.
    dim = len(query_vector.vector)
    return case((_is_model(query_vector.model, dim), 1 - _distance(dim, q)), else_=None)


def _top_pool(sims: Any, k: int) -> list[int]:
    """Indices of every similarity at least the k-th largest (ties included), so sorting
    only these by (-similarity, id) gives the same top k as sorting them all."""
    n = len(sims)
    if k >= n:
        return list(range(n))
    kth = np.partition(sims, n - k)[n - k]
    return [int(i) for i in np.flatnonzero(sims >= kth)]


def _keyword_matches(words: list[Any]) -> Any:
    """Ids of the user's memories sharing the most of the query's selective `words`
    (see `_selective`), at most `lexical_k`: an index-only scan of
    `ix_memory_keywords_user_keyword_sizes` (migration 0010; 0003 made it index-only)."""
    shared = func.count(MemoryKeyword.keyword)
    selective = _selective(words).subquery("selective_words")
    return (
        select(MemoryKeyword.memory_id)
        .where(
            MemoryKeyword.user_id == bindparam("user_id"),
            MemoryKeyword.keyword.in_(select(selective.c.keyword)),
        )
        .group_by(MemoryKeyword.memory_id)
        .order_by(shared.desc(), MemoryKeyword.memory_id)
        .limit(bindparam("lexical_k"))
    )


def _selective(words: list[Any]) -> Any:
    """The words of `words` in fewer than `cap` of the user's memories.

    A word in more of them cannot single out the few that matter (among 9,000 memories
    sharing "project", the top 50 by shared words are chosen by id), and reading its
    postings is what made this read grow with the store (bench/README.md). So
    each word's postings are counted only up to the cap, and the read stays bounded by
    words × cap whatever the user's size; a query of common words alone gets its
    lexical candidates from none of them, its relevance from the vector top-k."""
    rows = []
    for i, word in enumerate(words):
        postings = (
            select(literal_column("1"))
            .where(MemoryKeyword.user_id == bindparam("user_id"), MemoryKeyword.keyword == word)
            .limit(bindparam("cap"))
            .subquery(f"postings_{i}")
        )
        seen = select(func.count()).select_from(postings).scalar_subquery()
        rows.append(select(word.label("keyword")).where(seen < bindparam("cap")))
    return union_all(*rows)


class _Found:
    """The candidates of one assembly, gathered from several reads."""

    def __init__(
        self,
        visible: list[ColumnElement[bool]],
        params: dict[str, Any],
        top_k: int,
    ) -> None:
        self._visible = visible  # bound by `params`
        self._params = params
        self._top_k = top_k
        self.memories: dict[str, MemoryRecord] = {}
        self.models: dict[str, tuple[str, int] | None] = {}
        self.relevance: dict[str, float] = {}
        self.lexical: dict[str, float] = {}

    def add_rows(self, names: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        # By position (see _record); the names are looked up once per read.
        at = {name: i for i, name in enumerate(names)}
        i_id, i_model, i_dim = at["id"], at["embedding_model"], at["embedding_dim"]
        i_relevance, i_lexical = at["relevance"], at["lexical"]
        for row in rows:
            memory_id = row[i_id]
            if memory_id not in self.memories:
                self.memories[memory_id] = _record(row, at)
                model, dim = row[i_model], row[i_dim]
                self.models[memory_id] = (
                    (model, dim) if model is not None and dim is not None else None
                )
            relevance = row[i_relevance]
            if relevance is not None:
                self.relevance[memory_id] = max(0.0, min(1.0, float(relevance)))
            lexical = row[i_lexical]
            if lexical is not None and lexical > 0:
                self.lexical[memory_id] = float(lexical)

    def other_model(self, query_vector: QueryVector) -> tuple[str, int] | None:
        """The most common (model, dim) among candidates without a cosine, if any."""
        mine = (query_vector.model, len(query_vector.vector))
        others = Counter(
            model
            for memory_id, model in self.models.items()
            if model is not None and model != mine and memory_id not in self.relevance
        )
        return min(others, key=lambda m: (-others[m], m)) if others else None

    def pg_top_k(
        self, session: Session, query_vector: QueryVector, lexical_col: Any, terms: str | None
    ) -> None:
        """Add the top-k by cosine among the user's vectors of `query_vector`'s model."""
        q = bindparam("q2", value=list(query_vector.vector), type_=Vector())
        select_ = (
            select(*_COLUMNS, _pg_cosine(query_vector, q).label("relevance"), lexical_col)
            .where(*self._visible, _is_model(query_vector.model, len(query_vector.vector)))
            .order_by(_distance(len(query_vector.vector), q), MemoryRow.id)
            .limit(self._top_k)
        )
        self._add(session.execute(select_, {**self._params, "tsq": terms}))

    def _add(self, result: Any) -> None:
        names = list(result.keys())
        self.add_rows(names, result.all())

    def numpy_top_k(self, session: Session, query_vector: QueryVector) -> None:
        """SQLite has no vector index here (sqlite-vec cannot load on this Python), so the
        embedded default computes cosines in numpy over the user's visible vectors of the
        query vector's model, and adds the top-k."""
        dim = len(query_vector.vector)
        # The stored float32 bytes as they are: the column type would first turn each
        # vector into a list of Python floats, which costs far more than the cosines.
        blob = type_coerce(MemoryRow.embedding, LargeBinary).label("blob")
        rows = session.execute(
            select(MemoryRow.id, blob).where(*self._visible, _is_model(query_vector.model, dim)),
            self._params,
        ).all()
        if not rows:
            return
        ids = [row.id for row in rows]
        raw = b"".join(row.blob for row in rows)
        matrix = np.frombuffer(raw, dtype=np.float32).reshape(len(rows), dim)
        query = np.asarray(query_vector.vector, dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(query) or 1.0)
        norms[norms == 0] = 1.0
        sims = np.clip(row_dots(matrix, query) / norms, 0.0, 1.0)
        order = sorted(_top_pool(sims, self._top_k), key=lambda i: (-float(sims[i]), ids[i]))
        order = order[: self._top_k]
        wanted = [ids[i] for i in order if ids[i] not in self.memories]
        if wanted:
            none = _NULL_FLOAT
            select_ = select(*_COLUMNS, none.label("relevance"), none.label("lexical")).where(
                MemoryRow.id.in_(wanted)
            )
            self._add(session.execute(select_))
        for i, memory_id in enumerate(ids):
            if memory_id in self.memories:
                self.relevance[memory_id] = float(sims[i])

    def bm25(self, session: Session, query_text: str) -> None:
        """BM25 of every candidate over the candidates' keyword sets (SQLite)."""
        words = keywords(query_text)
        if not words or not self.memories:
            return
        stored = session.execute(
            select(MemoryRow.id, MemoryRow.keywords).where(MemoryRow.id.in_(list(self.memories)))
        ).all()
        documents = {row.id: sorted(row.keywords or ()) for row in stored}
        self.lexical.update(bm25_scores(words, documents))
