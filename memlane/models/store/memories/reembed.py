"""Moving a store to another embedder without downtime (`memlane reembed`).

Per user:
1. pages of the user's memories whose vector is not of the target (model, dim) and that
   have no target vector waiting are read; the worker embeds them (outside any
   transaction) and writes the result to `embedding_next*`. Meanwhile `embedding*` is
   untouched and keeps serving.
2. when none is left, under the user's lock (the store step takes it too, so no insert
   slips in between), one UPDATE moves every waiting vector into `embedding*` and
   clears `embedding_next*`. Until then the user's old vectors serve; from then on the
   new ones do. The assembler embeds the query with the model of the vectors it
   compares (see memlane/service/context_builder.py), so both sides of a swap are served.

Deleted memories are left as they are: they never reach a context again, and their text
must not be sent to an embedding provider. Every step is idempotent, so a task that
dies half-way is simply run again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import ColumnElement, and_, func, or_, select, update
from sqlalchemy.orm import Session

from memlane.models.store.memories.memories import user_lock
from memlane.models.store.users import change_feed as changes
from memlane.models.tables import MemoryRow


def _not_at_target(model: str, dim: int) -> ColumnElement[bool]:
    """The memory's serving vector is missing or of another model or dimension."""
    return or_(
        MemoryRow.embedding.is_(None),
        MemoryRow.embedding_model.is_distinct_from(model),
        MemoryRow.embedding_dim.is_distinct_from(dim),
    )


def _next_at_target(model: str, dim: int) -> ColumnElement[bool]:
    return and_(
        MemoryRow.embedding_next.is_not(None),
        MemoryRow.embedding_next_model == model,
        MemoryRow.embedding_next_dim == dim,
    )


def _considered(user_id: str) -> list[ColumnElement[bool]]:
    return [MemoryRow.user_id == user_id, MemoryRow.status != "deleted"]


def users_to_reembed(session: Session, *, model: str, dim: int) -> list[str]:
    """Users with at least one memory whose serving vector is not of (model, dim)."""
    rows = session.scalars(
        select(MemoryRow.user_id)
        .where(MemoryRow.status != "deleted", _not_at_target(model, dim))
        .distinct()
        .order_by(MemoryRow.user_id)
    )
    return list(rows)


def other_embedders(session: Session, *, model: str, dim: int) -> list[tuple[str, int, int, int]]:
    """(model, dim, memories, users) of each other embedder whose vectors serve memories
    that are not deleted: what `memlane reembed` to (model, dim) would move. One scan of
    the store, without reading a vector."""
    rows = session.execute(
        select(
            MemoryRow.embedding_model,
            MemoryRow.embedding_dim,
            func.count(),
            func.count(MemoryRow.user_id.distinct()),
        )
        .where(
            MemoryRow.status != "deleted",
            MemoryRow.embedding_model.is_not(None),  # set exactly when a vector is
            or_(MemoryRow.embedding_model != model, MemoryRow.embedding_dim.is_distinct_from(dim)),
        )
        .group_by(MemoryRow.embedding_model, MemoryRow.embedding_dim)
        .order_by(func.count().desc(), MemoryRow.embedding_model)
    ).all()
    return [(str(m), int(d or 0), int(n), int(u)) for m, d, n, u in rows]


def users_done(session: Session, user_ids: Sequence[str], *, model: str, dim: int) -> set[str]:
    """Those of `user_ids` none of whose memories still serves another model's vector."""
    if not user_ids:
        return set()
    pending = set(
        session.scalars(
            select(MemoryRow.user_id)
            .where(
                MemoryRow.user_id.in_(list(user_ids)),
                MemoryRow.status != "deleted",
                _not_at_target(model, dim),
            )
            .distinct()
        )
    )
    return set(user_ids) - pending


def pending_batch(
    session: Session, user_id: str, *, model: str, dim: int, limit: int
) -> list[tuple[str, str]]:
    """(id, content) of up to `limit` memories still to embed with the target model."""
    rows = session.execute(
        select(MemoryRow.id, MemoryRow.content)
        .where(
            *_considered(user_id),
            _not_at_target(model, dim),
            ~_next_at_target(model, dim),
        )
        .order_by(MemoryRow.id)
        .limit(limit)
    ).all()
    return [(row.id, row.content) for row in rows]


def save_next(
    session: Session, user_id: str, vectors: Mapping[str, Sequence[float]], *, model: str
) -> None:
    """Park the target model's vectors beside the serving ones."""
    for memory_id, vector in vectors.items():
        session.execute(
            update(MemoryRow)
            .where(MemoryRow.id == memory_id, MemoryRow.user_id == user_id)
            .values(
                embedding_next=list(vector),
                embedding_next_model=model,
                embedding_next_dim=len(vector),
            )
        )


def swap_if_complete(session: Session, user_id: str, *, model: str, dim: int) -> int | None:
    """Under the user's lock: if every memory of the user has a target vector (serving or
    waiting), move the waiting ones into service in one UPDATE and return how many moved;
    None (nothing changed) when some are still missing, e.g. inserted since the last page."""
    user_lock(session, user_id)
    missing = session.scalar(
        select(func.count())
        .select_from(MemoryRow)
        .where(*_considered(user_id), _not_at_target(model, dim), ~_next_at_target(model, dim))
    )
    if missing:
        return None
    result = session.execute(
        update(MemoryRow)
        .where(MemoryRow.user_id == user_id, _next_at_target(model, dim))
        .values(
            embedding=MemoryRow.embedding_next,
            embedding_model=MemoryRow.embedding_next_model,
            embedding_dim=MemoryRow.embedding_next_dim,
            embedding_next=None,
            embedding_next_model=None,
            embedding_next_dim=None,
            change_seq=changes.stamp(session, user_id),
        )
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]
