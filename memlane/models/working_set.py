"""The per-process working set: each active user's items, indexed for ranking
(pipeline.user_view.UserView), kept current by the store's change feed
(store/changes.py) and bounded in memory.

- First assembly for a user: the user's change number, then every item (store/user_items).
- Every later one: the change number alone, one small read that is all most assemblies
  pay; when it moved, the rows written since, applied to the records, and the index built
  again. A write committed before an assembly starts is always seen by it, in any process.
- Bounded: at most `budget_mb` of views (their estimated size), the least recently used
  users evicted whole. A user too large for the bound is not kept: the caller reads the
  store for them (`view` returns None), as it does for a user whose vectors belong to two
  embedders while `memlane reembed` runs.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy.orm import Session

from memlane.models.db import read_unit
from memlane.models.store import changes, user_items
from memlane.models.store.context_items import episode_record, procedure_record
from memlane.models.store.memories import to_record
from memlane.models.store.user_items import Vector
from memlane.pipeline.records import EpisodeRecord, MemoryRecord, Procedure, SoulBlock
from memlane.pipeline.user_view import Record, UserView

MB = 1024 * 1024


Vectors = tuple[str, Vector] | None  # (embedder, vector) of an item, or None


def _vector(model: str | None, values: list[float] | None) -> Vectors:
    if model is None or values is None:
        return None
    return model, np.asarray(values, dtype=np.float32)


@dataclass(slots=True)
class _User:
    version: int
    memories: dict[str, tuple[MemoryRecord, Vectors]] = field(default_factory=dict)
    episodes: dict[str, tuple[EpisodeRecord, Vectors]] = field(default_factory=dict)
    procedures: dict[str, Procedure] = field(default_factory=dict)
    soul: dict[str, SoulBlock] = field(default_factory=dict)
    view: UserView | None = None
    view_for: tuple[str, int] | None = None
    size: int = 0
    models: frozenset[str] | None = None  # the embedders of the memories' vectors

    def apply(self, found: changes.Changes) -> None:
        """Apply rows written since `version`: to the records, and to the view in the
        time of the rows they touch (UserView.patch)."""
        upserts: list[tuple[Record, Vectors]] = []
        removed: list[str] = []
        for row in found.memories:
            if row.status == "active":
                memory = (to_record(row), _vector(row.embedding_model, row.embedding))
                self.memories[row.id] = memory
                upserts.append(memory)
            elif self.memories.pop(row.id, None) is not None:
                removed.append(row.id)
        for episode in found.episodes:
            item = (
                episode_record(episode, with_embedding=False),
                _vector(episode.embedding_model, episode.embedding),
            )
            self.episodes[episode.id] = item
            upserts.append(item)
        for procedure in found.procedures:
            self.procedures[procedure.id] = procedure_record(procedure)
            upserts.append((self.procedures[procedure.id], None))
        for block in found.soul_blocks:
            self.soul[block.kind] = SoulBlock(
                user_id=block.user_id,
                kind=block.kind,  # type: ignore[arg-type]
                content=block.content,
                updated_at=block.updated_at,
            )
        for gone in found.removed:
            if gone.item_id.startswith("soul:"):
                self.soul.pop(gone.item_id.removeprefix("soul:"), None)
            for items in (self.memories, self.episodes, self.procedures):
                if items.pop(gone.item_id, None) is not None:  # type: ignore[attr-defined]
                    removed.append(gone.item_id)
        self.version = max(self.version, found.version)
        self.models = None
        if self.view is not None:
            self.view = self.view.patch(upserts, removed, self._soul_blocks())
            self.size = self.view.size_bytes

    def _soul_blocks(self) -> list[SoulBlock]:
        return [self.soul[kind] for kind in sorted(self.soul)]

    def mixed_embedders(self, model: str) -> bool:
        if self.models is None:
            self.models = frozenset(v[0] for _, v in self.memories.values() if v is not None)
        return bool(self.models - {model})

    def view_of(self, model: str, dim: int) -> UserView:
        if self.view is None or self.view_for != (model, dim):
            memories = sorted(self.memories.values(), key=lambda pair: pair[0].id)
            episodes = sorted(self.episodes.values(), key=lambda pair: pair[0].id)
            self.view = UserView.build(
                memories=[m for m, _ in memories],
                memory_vectors=[vector for _, vector in memories],
                episodes=[e for e, _ in episodes],
                episode_vectors=[vector for _, vector in episodes],
                procedures=sorted(self.procedures.values(), key=lambda p: p.id),
                soul_blocks=self._soul_blocks(),
                model=model,
                dim=dim,
            )
            self.view_for = (model, dim)
            self.size = self.view.size_bytes
        return self.view


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
            if user is None:
                user = read_unit(self.url, lambda session: self._load(session, user_id))
            else:
                self._users.move_to_end(user_id)
                latest = changes.latest(self.url, user_id)
                if latest > user.version:
                    found = read_unit(
                        self.url, lambda session: changes.since(session, user_id, user.version)
                    )
                    found.version = max(found.version, latest)
                    user.apply(found)
            if user.mixed_embedders(model):
                return None
            view = user.view_of(model, dim)
            self._users[user_id] = user
            if user.size > self.budget_bytes:
                self._users.pop(user_id, None)
                return None
            while self.size_bytes > self.budget_bytes and len(self._users) > 1:
                self._users.popitem(last=False)
            return view

    def forget(self, user_id: str) -> None:
        with self._lock:
            self._users.pop(user_id, None)

    def _load(self, session: Session, user_id: str) -> _User:
        version = changes.version(session, user_id)  # first: the rows read next are newer
        items = user_items.load(session, user_id)
        user = _User(version=version)
        user.memories = {
            m.id: (m, v) for m, v in zip(items.memories, items.memory_vectors, strict=True)
        }
        user.episodes = {
            e.id: (e, v) for e, v in zip(items.episodes, items.episode_vectors, strict=True)
        }
        user.procedures = {p.id: p for p in items.procedures}
        user.soul = {b.kind: b for b in items.soul_blocks}
        return user
