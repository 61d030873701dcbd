"""The per-process working set: each active user's items, indexed for ranking
(pipeline.ranking.user_view.UserView), kept current by the store's change feed
(store/users/change_feed.py) and bounded in memory.

- First assembly for a user: the user's change number, then every item (store/user_items).
- Every later one: the change number alone, one small read that is all most assemblies
  pay; when it moved, the rows written since, patched into the view (UserView.patch). A
  write committed before an assembly starts is always seen by it, in any process.
- A large user (more than `eager_items` items of all time; on PostgreSQL EAGER_ITEMS,
  on SQLite none) is loaded by a background thread: their first assemblies read the
  store until the view is ready, rather than wait for it (a load's cost grows with the
  user: bench/README.md). `warm` loads a user at once.
- Per agent (pipeline.scope): a view holds what one reader sees, the user's shared items
  and one agent's (or the shared ones alone), so a user read for two agents has two views,
  each kept current from the one change feed.
- Bounded: at most `budget_mb` of views (their estimated size), the least recently used
  users evicted whole. A user too large for the bound is not kept, nor loaded again on
  their next assemblies: the caller reads the store for them (`view` returns None), as
  it does for a user whose vectors belong to two embedders while `memlane reembed` runs.
"""

from __future__ import annotations

import logging
import sys
import threading
import weakref
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy.orm import Session

from memlane.models import collector
from memlane.models.db import read_unit
from memlane.models.store.memories import refs
from memlane.models.store.reads import metadata_reads
from memlane.models.store.rows import Vector
from memlane.models.store.users import change_feed as changes
from memlane.models.store.users import items as user_items
from memlane.models.store.users.context_items import episode_record, procedure_record
from memlane.pipeline.metadata.filters import Filter
from memlane.pipeline.metadata.masks import Groups, allowed_rows, groups_of
from memlane.pipeline.ranking.memory_table import Record
from memlane.pipeline.ranking.user_view import PROCEDURE, RECORD_BYTES, UserView
from memlane.pipeline.records import SoulBlock
from memlane.pipeline.scope import sees

MB = 1024 * 1024
# On PostgreSQL, users with at most this many items load with their first assembly (a
# wait it can afford: at 5k ~55 ms of CPU, about what the store read serving it
# meanwhile takes); larger ones in the background. On SQLite every user loads at once:
# its store read was no faster than the load at any size measured, half as fast up to
# 10k (bench/README.md).
EAGER_ITEMS = 5000

# Row masks kept per user (`WorkingSet.allowed`): a chat app filters by a few values at a
# time; each mask is a byte a row.
MASKS_KEPT = 8

log = logging.getLogger("memlane.working_set")


Vectors = tuple[str, Vector] | None  # (embedder, vector) of an item, or None
Key = tuple[str, str | None]  # (user, agent): whose view, read by which agent


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
    agent_id: str | None = None  # the reader: shared items and this agent's
    size: int = 0
    model_counts: Counter[str] = field(default_factory=Counter)  # of memory_models' values
    # the metadata of the items that have some, by id: an assembly's filter reads it
    # (pipeline.metadata.masks), equal ones one object
    metadata: dict[str, dict[str, Any]] = field(default_factory=dict)
    interned: metadata_reads.Interned = field(default_factory=dict)
    # for `masks_of`, the view last filtered: its rows grouped by metadata object, and
    # the row masks of its latest filters by the filter's repr (which tells 1 from
    # true); a view never changes, a write makes a new one
    groups: Groups | None = None
    masks: OrderedDict[str, npt.NDArray[np.bool_]] = field(default_factory=OrderedDict)
    masks_of: UserView | None = None

    def __post_init__(self) -> None:
        self.model_counts = Counter(self.memory_models.values())

    def _set_model(self, memory_id: str, model: str | None) -> None:
        previous = self.memory_models.pop(memory_id, None)
        if previous is not None:
            self.model_counts[previous] -= 1
        if model is not None:
            self.memory_models[memory_id] = model
            self.model_counts[model] += 1

    def apply(self, found: changes.Changes) -> None:
        """Apply rows written since `version` to the view, in the time of the rows they
        touch (UserView.patch)."""
        upserts: list[tuple[Record, Vectors]] = []
        removed = [gone.item_id for gone in found.removed]
        for record, status, vector in found.memories:
            shown = status == "active" and sees(self.agent_id, record.agent_id)
            self._set_metadata(record.id, record.metadata if shown else None)
            if not shown:
                self._set_model(record.id, None)
                removed.append(record.id)
                continue
            self._set_model(record.id, None if vector is None else vector[0])
            upserts.append((record, vector))
        for episode in found.episodes:
            if not sees(self.agent_id, episode.agent_id):
                continue
            self._set_metadata(episode.id, episode.meta)
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
            self._set_model(gone.item_id, None)
            self._set_metadata(gone.item_id, None)
            if gone.item_id.startswith("soul:"):
                self.soul.pop(gone.item_id.removeprefix("soul:"), None)
        self.version = max(self.version, found.version)
        self.view = self.view.patch(upserts, removed, _in_order(self.soul))
        self.size = self.view.size_bytes

    def _set_metadata(self, item_id: str, metadata: dict[str, Any] | None) -> None:
        if metadata:
            self.metadata[item_id] = metadata_reads.share(metadata, self.interned)
        else:
            self.metadata.pop(item_id, None)

    @property
    def bytes(self) -> int:
        """The view's estimated memory (UserView.size_bytes), with the records built
        since it was loaded."""
        return self.size + RECORD_BYTES * self.view.records.made

    def mixed_embedders(self) -> bool:
        return any(n > 0 for model, n in self.model_counts.items() if model != self.view_for[0])


def _in_order(soul: dict[str, SoulBlock]) -> list[SoulBlock]:
    return [soul[kind] for kind in sorted(soul)]


class _UserLock:
    """One user's lock, a context manager; WorkingSet keeps it by a weak reference, so it
    lives as long as a thread holds it or waits for it."""

    __slots__ = ("__weakref__", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def __enter__(self) -> _UserLock:
        self._lock.acquire()
        return self

    def __exit__(self, *_: object) -> None:
        self._lock.release()


class WorkingSet:
    """The working set of one process for one database (module docstring).

    Locks: one per user (kept only while some thread holds or waits for it, so their
    number follows the users being served; striped locks made one user's load hold up
    the users sharing its stripe) is held while a user's view is read, brought current or
    loaded, so that work is done once per user at a time; the set's own lock guards only
    the bookkeeping (which users are kept, their order, who is loading) and is never held
    across a read. So one user's load or change read never makes another user's assembly
    wait, and assemblies of different users run side by side wherever they leave the
    interpreter (database round trips, numpy)."""

    def __init__(self, url: str, *, budget_mb: float, eager_items: int | None = None) -> None:
        self.url = url
        self.budget_bytes = int(budget_mb * MB)
        if eager_items is None:
            eager_items = EAGER_ITEMS if url.startswith("postgresql") else sys.maxsize
        self.eager_items = eager_items
        self._users: OrderedDict[Key, _User] = OrderedDict()
        self._lock = threading.Lock()
        self._user_locks: weakref.WeakValueDictionary[str, _UserLock] = (
            weakref.WeakValueDictionary()
        )
        self._loading: dict[Key, threading.Thread] = {}
        # users found too large for the bound: the store serves them without a load on
        # every assembly (`warm` or `forget` lets them try again)
        self._refused: set[Key] = set()

    @property
    def size_bytes(self) -> int:
        return sum(user.bytes for user in list(self._users.values()))

    def __contains__(self, user_id: str) -> bool:
        return any(user == user_id for user, _ in list(self._users))

    def user_lock(self, user_id: str) -> _UserLock:
        """The lock a user's view is read and brought current under (class docstring)."""
        with self._lock:
            lock = self._user_locks.get(user_id)
            if lock is None:
                lock = self._user_locks[user_id] = _UserLock()
            return lock

    def view(
        self,
        user_id: str,
        *,
        model: str,
        dim: int,
        sparse: bool = False,
        agent_id: str | None = None,
    ) -> UserView | None:
        """The user's view for `agent_id` (module docstring), current as of this call;
        None when the store must serve them (too large for the bound, vectors of two
        embedders, or loading in the background). `sparse`: the embedder's vectors are
        (EmbedderCapabilities)."""
        key = (user_id, agent_id)
        with self.user_lock(user_id):
            with self._lock:
                user = self._users.get(key)
                if user is not None:
                    self._users.move_to_end(key)
                loading = key in self._loading
                refused = key in self._refused
            if user is not None and user.view_for != (model, dim):
                user = None  # another embedder: its vectors are read afresh
            if user is None:
                if loading or refused:
                    return None
                if read_unit(self.url, lambda s: refs.issued(s, user_id)) > self.eager_items:
                    with self._lock:
                        if key not in self._loading:
                            self._load_later(key, model, dim, sparse)
                    return None
                user = read_unit(self.url, lambda s: _load(s, *key, model, dim, sparse))
            elif not self._catch_up(user_id, user):  # erased: what is left is read again
                with self._lock:
                    self._users.pop(key, None)
                user = read_unit(self.url, lambda s: _load(s, *key, model, dim, sparse))
            with self._lock:
                return self._keep(key, user)

    def warm(
        self,
        user_id: str,
        *,
        model: str,
        dim: int,
        sparse: bool = False,
        agent_id: str | None = None,
    ) -> UserView | None:
        """Load the user's view for `agent_id` now, whatever their size (a background
        load under way is waited for), and return it; None when the working set cannot
        serve them."""
        key = (user_id, agent_id)
        with self._lock:
            loading = self._loading.get(key)
        if loading is not None:
            loading.join()
        with self.user_lock(user_id):
            with self._lock:
                user = self._users.get(key)
            if user is None or user.view_for != (model, dim) or not self._catch_up(user_id, user):
                user = read_unit(self.url, lambda s: _load(s, *key, model, dim, sparse))
            with self._lock:
                return self._keep(key, user)

    def allowed(
        self, user_id: str, view: UserView, where: Filter, *, agent_id: str | None = None
    ) -> npt.NDArray[np.bool_]:
        """The rows of `view` (the user's for `agent_id`, from `view`) an assembly
        filtered by `where` may use, from the metadata kept beside it: no store read,
        unless the user was evicted meanwhile."""
        with self._lock:
            user = self._users.get((user_id, agent_id))
        unfiltered = view.kind == PROCEDURE  # procedures carry no metadata
        if user is None:
            metadata = read_unit(self.url, lambda s: metadata_reads.item_metadata(s, user_id, {}))
            return allowed_rows(groups_of(view.corpus.ids, metadata), unfiltered, where)
        key = repr(where)
        with self.user_lock(user_id):
            if user.masks_of is not view or user.groups is None:
                user.masks.clear()
                user.groups = groups_of(view.corpus.ids, user.metadata)
                user.masks_of = view
            mask = user.masks.get(key)
            if mask is None:
                mask = allowed_rows(user.groups, unfiltered, where)
                mask.flags.writeable = False  # shared by the assemblies that use it
                user.masks[key] = mask
                while len(user.masks) > MASKS_KEPT:
                    user.masks.popitem(last=False)
            user.masks.move_to_end(key)
            return mask

    def forget(self, user_id: str) -> None:
        """Drop the user's views, for every agent."""
        with self._lock:
            for key in [k for k in self._users if k[0] == user_id]:
                self._users.pop(key, None)
            self._refused = {k for k in self._refused if k[0] != user_id}

    def _catch_up(self, user_id: str, user: _User) -> bool:
        """Apply what was written since the user's view was current (module docstring).
        False when the user's change number went back: they were erased (and may have
        been written again since), and the view must be built afresh."""
        latest, found = changes.poll(self.url, user_id, user.version)
        if latest < user.version:
            return False
        if latest > user.version:
            if found is None:
                found = changes.read_since(self.url, user_id, user.version)
                # `since` reads table by table, on PostgreSQL each statement in a snapshot
                # of its own: past `latest` a row may have been missed while a later one of
                # another table was read. Every number up to `latest` was committed before
                # the poll, so the view is current as of it; rows past it are read again.
                found.version = latest
            found.version = max(found.version, latest)
            user.apply(found)
        return True

    def _keep(self, key: Key, user: _User) -> UserView | None:
        """Keep the user's view within the bound (the caller holds the set's lock)."""
        if user.mixed_embedders():
            return None
        self._users[key] = user
        self._users.move_to_end(key)
        if user.bytes > self.budget_bytes:
            self._users.pop(key, None)
            self._refused.add(key)
            return None
        self._refused.discard(key)
        while self.size_bytes > self.budget_bytes and len(self._users) > 1:
            self._users.popitem(last=False)
        return user.view

    def _load_later(self, key: Key, model: str, dim: int, sparse: bool) -> None:
        """Load the user's view in a thread of its own (the caller holds the set's lock)."""

        def load() -> None:
            try:
                user = read_unit(self.url, lambda s: _load(s, *key, model, dim, sparse))
                with self._lock:
                    current = self._users.get(key)
                    if current is None or current.view_for != (model, dim):
                        self._keep(key, user)
            except Exception:
                log.exception("could not load the working set of user %s", key[0])
            finally:
                with self._lock:
                    self._loading.pop(key, None)

        thread = threading.Thread(target=load, name="memlane-working-set-load", daemon=True)
        self._loading[key] = thread
        thread.start()


def _load(
    session: Session, user_id: str, agent_id: str | None, model: str, dim: int, sparse: bool
) -> _User:
    version = changes.version(session, user_id)  # first: the rows read next are newer
    interned: metadata_reads.Interned = {}
    with collector.paused():  # tens of thousands of containers, none garbage
        items = user_items.load(session, user_id, model=model, dim=dim, agent_id=agent_id)
        view = UserView.load(
            memories=items.memories,
            episodes=items.episodes,
            episode_vectors=items.episode_vectors,
            procedures=items.procedures,
            soul_blocks=items.soul_blocks,
            model=model,
            dim=dim,
            by_component=sparse,
        )
        return _User(
            version=version,
            view=view,
            view_for=(model, dim),
            memory_models={
                memory_id: of
                for memory_id, of in zip(items.memories.ids, items.memory_models, strict=True)
                if of is not None
            },
            soul={b.kind: b for b in items.soul_blocks},
            agent_id=agent_id,
            size=view.size_bytes,
            metadata=metadata_reads.item_metadata(session, user_id, interned),
            interned=interned,
        )
