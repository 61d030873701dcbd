"""The per-process working set: each active user's items, indexed for ranking
(pipeline.user_view.UserView), kept current by the store's change feed
(store/changes.py) and bounded in memory.

- First assembly for a user: the user's change number, then every item (store/user_items).
- Every later one: the change number alone, one small read that is all most assemblies
  pay; when it moved, the rows written since, patched into the view (UserView.patch). A
  write committed before an assembly starts is always seen by it, in any process.
- Bounded: at most `budget_mb` of views (their estimated size), the least recently used
  users evicted whole. A user too large for the bound is not kept: the caller reads the
  store for them (`view` returns None), as it does for a user whose vectors belong to two
  embedders while `memlane reembed` runs.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
from sqlalchemy.orm import Session

from memlane.models.db import read_unit
from memlane.models.store import changes, user_items
from memlane.models.store.context_items import episode_record, procedure_record
from memlane.models.store.memories import to_record
from memlane.models.store.user_items import Vector
from memlane.pipeline.records import SoulBlock
from memlane.pipeline.user_view import Record, UserView

MB = 1024 * 1024


Vectors = tuple[str, Vector] | None  # (embedder, vector) of an item, or None


def _vector(model: str | None, values: list[float] | None) -> Vectors:
    if model is None or values is None:
        return None
    return model, np.asarray(values, dtype=np.float32)


@dataclass(slots=True)
class _User:
    """One user's view, the change number it is current as of, and what applying changes
    needs beside it: the embedder of each memory's vector (a user whose vectors belong to
    two embedders is served by the store) and the soul blocks by kind."""

    version: int
    view: UserView
    view_for: tuple[str, int]  # the embedder and dimension the view ranks with
    memory_models: dict[str, str]
    soul: dict[str, SoulBlock]
    size: int = 0
    models: frozenset[str] | None = None  # memory_models' values, while unchanged

    def apply(self, found: changes.Changes) -> None:
        """Apply rows written since `version` to the view, in the time of the rows they
        touch (UserView.patch)."""
        upserts: list[tuple[Record, Vectors]] = []
        removed = [gone.item_id for gone in found.removed]
        for row in found.memories:
            self.memory_models.pop(row.id, None)
            if row.status != "active":
                removed.append(row.id)
                continue
            vector = _vector(row.embedding_model, row.embedding)
            if vector is not None:
                self.memory_models[row.id] = vector[0]
            upserts.append((to_record(row), vector))
        for episode in found.episodes:
            vector = _vector(episode.embedding_model, episode.embedding)
            upserts.append((episode_record(episode, with_embedding=False), vector))
        upserts += [(procedure_record(procedure), None) for procedure in found.procedures]
        for block in found.soul_blocks:
            self.soul[block.kind] = SoulBlock(
                user_id=block.user_id,
                kind=block.kind,  # type: ignore[arg-type]
                content=block.content,
                updated_at=block.updated_at,
            )
        for gone in found.removed:
            self.memory_models.pop(gone.item_id, None)
            if gone.item_id.startswith("soul:"):
                self.soul.pop(gone.item_id.removeprefix("soul:"), None)
        self.version = max(self.version, found.version)
        self.models = None
        self.view = self.view.patch(upserts, removed, _in_order(self.soul))
        self.size = self.view.size_bytes

    def mixed_embedders(self) -> bool:
        if self.models is None:
            self.models = frozenset(self.memory_models.values())
        return bool(self.models - {self.view_for[0]})


def _in_order(soul: dict[str, SoulBlock]) -> list[SoulBlock]:
    return [soul[kind] for kind in sorted(soul)]


class WorkingSet:
    """The working set of one process for one database (module docstring)."""

    def __init__(self, url: str, *, budget_mb: float) -> None:
        self.url = url
        self.budget_bytes = int(budget_mb * MB)
        self._users: OrderedDict[str, _User] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def size_bytes(self) -> int:
        return sum(user.size for user in self._users.values())

    def __contains__(self, user_id: str) -> bool:
        return user_id in self._users

    def view(self, user_id: str, *, model: str, dim: int) -> UserView | None:
        """The user's view, current as of this call; None when the store must serve them
        (too large for the bound, or vectors of two embedders)."""
        with self._lock:
            user = self._users.get(user_id)
            if user is not None and user.view_for != (model, dim):
                user = None  # another embedder: its vectors are read afresh
            if user is None:
                user = read_unit(self.url, lambda session: _load(session, user_id, model, dim))
            else:
                self._users.move_to_end(user_id)
                latest = changes.latest(self.url, user_id)
                if latest > user.version:
                    found = read_unit(
                        self.url, lambda session: changes.since(session, user_id, user.version)
                    )
                    found.version = max(found.version, latest)
                    user.apply(found)
            if user.mixed_embedders():
                return None
            self._users[user_id] = user
            if user.size > self.budget_bytes:
                self._users.pop(user_id, None)
                return None
            while self.size_bytes > self.budget_bytes and len(self._users) > 1:
                self._users.popitem(last=False)
            return user.view

    def forget(self, user_id: str) -> None:
        with self._lock:
            self._users.pop(user_id, None)


def _load(session: Session, user_id: str, model: str, dim: int) -> _User:
    version = changes.version(session, user_id)  # first: the rows read next are newer
    items = user_items.load(session, user_id)
    view = UserView.build(
        memories=items.memories,
        memory_vectors=items.memory_vectors,
        episodes=items.episodes,
        episode_vectors=items.episode_vectors,
        procedures=items.procedures,
        soul_blocks=items.soul_blocks,
        model=model,
        dim=dim,
    )
    return _User(
        version=version,
        view=view,
        view_for=(model, dim),
        memory_models={
            m.id: v[0]
            for m, v in zip(items.memories, items.memory_vectors, strict=True)
            if v is not None
        },
        soul={b.kind: b for b in items.soul_blocks},
        size=view.size_bytes,
    )
