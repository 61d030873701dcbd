"""The facade's memory management (Memlane inherits it): add, read, correct, curate,
forget and purge a user's memories, and read their history.

Each change is recorded in the memory's history with its actor: the lane's own
(`Memlane.actor`: `python`, or `cli` for the command line) unless a call names another
(the API passes `api:<key name>`).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, get_args

from pydantic import ValidationError

from memlane.models.db import unit_of_work
from memlane.models.schemas import (
    MemoryCreate,
    MemoryEdit,
    MemoryEvent,
    MemoryPage,
    MemoryPatch,
    MemoryPublic,
    Remembered,
)
from memlane.models.store import rows
from memlane.models.store.memories import edits as memory_changes
from memlane.models.store.memories import events as memory_events
from memlane.models.store.memories import fingerprints, memories
from memlane.models.store.reads import dedup as dedup_reads
from memlane.pipeline.dedup import plan as dedup
from memlane.pipeline.dedup.keywords import keywords
from memlane.pipeline.errors import ConflictError, InvalidInputError, NotFoundError, problems_of
from memlane.pipeline.metadata.filters import EVERYTHING, filter_of
from memlane.pipeline.records import MemoryStatus, Tier
from memlane.service import memory_pages
from memlane.service.input_checks import check_category, checked

if TYPE_CHECKING:
    from memlane.config.settings import Settings
    from memlane.service.context_builder import ContextBuilder
    from memlane.workers.embedders import Embedder

_EDIT_FIELDS = frozenset(MemoryEdit.model_fields)


def _now() -> datetime:
    return datetime.now(UTC)


class MemoryCuration:
    """Memory management over the store; mixed into Memlane."""

    actor: str

    if TYPE_CHECKING:
        settings: Settings
        url: str
        contexts: ContextBuilder

        @property
        def embedder(self) -> Embedder: ...

    def _actor(self, actor: str | None) -> str:
        return actor if actor is not None else self.actor

    @checked("user_id")
    def add_memory(
        self,
        user_id: str,
        memory: MemoryCreate | Mapping[str, Any],
        *,
        actor: str | None = None,
    ) -> MemoryPublic:
        """Add a memory by hand; one that duplicates a stored memory (the dedup rule)
        confirms it instead (see `add_or_confirm`)."""
        return self.add_or_confirm(user_id, memory, actor=actor)[0]

    @checked("user_id")
    def add_or_confirm(
        self,
        user_id: str,
        memory: MemoryCreate | Mapping[str, Any],
        *,
        actor: str | None = None,
    ) -> tuple[MemoryPublic, bool]:
        """The memory and whether it is new: content that duplicates an active memory by
        the dedup rule confirms it (memory_changes.confirm) instead of storing a copy;
        one that duplicates a forgotten memory is refused (ConflictError), since
        forgetting keeps a fact out until the memory is restored or purged."""
        try:
            created = (
                memory if isinstance(memory, MemoryCreate) else MemoryCreate.model_validate(memory)
            )
        except ValidationError as exc:
            raise InvalidInputError(problems_of(exc, at_most=1)) from None
        check_category(created.category, self.settings.categories, where="category")
        words = keywords(created.content)
        vector = self.embedder.embed([created.content])[0]
        settings = self.settings
        with unit_of_work(self.url) as session:
            memories.user_lock(session, user_id)
            known = dedup_reads.candidates(
                session,
                user_id,
                [(created.content, words)],
                threshold=settings.dedup_threshold,
                min_keywords=settings.dedup_min_keywords,
            )
            match = dedup.duplicate_of(
                created.content,
                words,
                known,
                threshold=settings.dedup_threshold,
                min_keywords=settings.dedup_min_keywords,
            )
            if match is None:
                stored = memories.add(
                    session,
                    user_id=user_id,
                    memory=created,
                    keywords=words,
                    embedding=vector,
                    embedding_model=self.embedder.name,
                    now=_now(),
                    actor=self._actor(actor),
                )
                return stored, True
            if match.status == "deleted":
                raise ConflictError(
                    f"memory {match.id} (#{match.ref}) says this and is forgotten: restore it "
                    "(status active) to keep the fact, or purge it to add it anew"
                )
            confirmed = memory_changes.confirm(
                session,
                user_id,
                match.id,
                importance=created.importance,
                confidence=created.confidence,
                tier=created.tier,
                sensitive=created.sensitive,
                actor=self._actor(actor),
                metadata=created.metadata,
            )
            return confirmed, False

    @checked("user_id")
    def remember(self, user_id: str, memory: MemoryCreate | Mapping[str, Any] | str) -> Remembered:
        """Store one fact now, without the extraction pipeline (the MCP server's `remember`
        tool), by the rule of every fact added by hand (`add_or_confirm`): `known` when an
        active memory already says it (a duplicate, as pipeline.dedup.plan decides; it is
        confirmed: seen once more, importance and confidence raised), ConflictError when
        the user asked to forget it (pipeline.dedup.plan rule 0)."""
        if isinstance(memory, str):
            created = MemoryCreate(content=memory)
        elif isinstance(memory, MemoryCreate):
            created = memory
        else:
            created = MemoryCreate.model_validate(memory)
        stored, new = self.add_or_confirm(user_id, created)
        return Remembered(outcome="stored" if new else "known", memory=stored)

    @checked("user_id", "cursor", "agent_id")
    def memories_page(
        self,
        user_id: str,
        *,
        status: MemoryStatus | None = "active",
        limit: int = 100,
        cursor: str | None = None,
        agent_id: str | None = None,
        filter: Mapping[str, Any] | str | None = None,  # the API's word
    ) -> MemoryPage:
        """A page of the user's memories, newest first; `next_cursor` (None on the last
        page) asks for the next. Exact however the store changes between pages.
        `agent_id`: the shared memories and that agent's; without, the shared ones.
        `filter`: only memories whose metadata passes it (a JSON object, or its text;
        pipeline.metadata.filters)."""
        return memory_pages.memories_page(
            self.url,
            user_id,
            status=status,
            limit=limit,
            cursor=cursor,
            agent_id=agent_id,
            where=filter_of(filter),
        )

    @checked("user_id", "memory_id")
    def get_memory(self, user_id: str, memory_id: str) -> MemoryPublic:
        with unit_of_work(self.url) as session:
            return rows.to_public(memories.get(session, user_id, memory_id))

    @checked("user_id", "agent_id")
    def list_memories(
        self,
        user_id: str,
        *,
        status: MemoryStatus | None = "active",
        limit: int = 100,
        offset: int = 0,
        agent_id: str | None = None,
        filter: Mapping[str, Any] | str | None = None,  # the API's word
    ) -> list[MemoryPublic]:
        """The user's memories, most important first: the shared ones and, with
        `agent_id`, that agent's (memlane.pipeline.scope); `filter`: only those whose
        metadata it passes (pipeline.metadata.filters; a malformed one is a MetadataError
        naming the bad part)."""
        where = filter_of(filter)
        with unit_of_work(self.url) as session:
            return memories.list_for_user(
                session,
                user_id,
                status=status,
                limit=limit,
                offset=offset,
                agent_id=agent_id,
                where=where,
            )

    @checked("user_id", "memory_id")
    def memory_history(self, user_id: str, memory_id: str) -> list[MemoryEvent]:
        """The memory's events, oldest first: where it came from and every change since.
        A purged memory (named by its full id) keeps only its `purged` event."""
        with unit_of_work(self.url) as session:
            # a purged memory's events are found by its full id, or there are none
            with suppress(NotFoundError):
                memory_id = memories.get(session, user_id, memory_id).id
            return memory_events.history(session, user_id, memory_id)

    @checked("user_id", "memory_id")
    def set_tier(
        self, user_id: str, memory_id: str, tier: Tier, *, actor: str | None = None
    ) -> MemoryPublic:
        with unit_of_work(self.url) as session:
            return memory_changes.set_tier(
                session, user_id, memory_id, tier, actor=self._actor(actor)
            )

    def pin(self, user_id: str, memory_id: str, *, actor: str | None = None) -> MemoryPublic:
        return self.set_tier(user_id, memory_id, "pinned", actor=actor)

    def verify(self, user_id: str, memory_id: str, *, actor: str | None = None) -> MemoryPublic:
        return self.set_tier(user_id, memory_id, "verified", actor=actor)

    @checked("user_id", "memory_id")
    def quarantine(self, user_id: str, memory_id: str, *, actor: str | None = None) -> MemoryPublic:
        with unit_of_work(self.url) as session:
            return memory_changes.set_status(
                session, user_id, memory_id, "quarantined", actor=self._actor(actor)
            )

    @checked("user_id", "memory_id")
    def forget(self, user_id: str, memory_id: str, *, actor: str | None = None) -> MemoryPublic:
        """Marks the memory deleted: it never reaches a context again, and a conversation
        that states it again does not bring it back (pipeline.dedup.plan rule 0). Reversible
        (status active) until purged. Takes the user's lock, as the store stage does: a
        job storing beside it sees the memory forgotten, or confirms it before."""
        with unit_of_work(self.url) as session:
            memories.user_lock(session, user_id)
            return memory_changes.set_status(
                session, user_id, memory_id, "deleted", actor=self._actor(actor)
            )

    @checked("user_id")
    def forget_matching(
        self, user_id: str, filter: Mapping[str, Any] | str, *, actor: str | None = None
    ) -> list[MemoryPublic]:
        """Forget (as `forget`) every active memory of the user whose metadata passes
        `filter`, in one transaction under the user's lock; those memories, most
        important first. A filter that passes everything (`{}`) is refused."""
        where = filter_of(filter)
        if where is None or where == EVERYTHING:
            raise InvalidInputError("filter: give conditions; `erase_user` removes everything")
        with unit_of_work(self.url) as session:
            memories.user_lock(session, user_id)
            found = memories.list_for_user(session, user_id, limit=1_000_000, where=where)
            return [
                memory_changes.set_status(
                    session, user_id, m.id, "deleted", actor=self._actor(actor)
                )
                for m in found
            ]

    @checked("user_id", "memory_id")
    def purge(self, user_id: str, memory_id: str, *, actor: str | None = None) -> str:
        """Delete the memory for good (memory_changes.purge: under the user's lock, with
        what was derived from it); its id. Forgetting is reversible until then. This
        process's working set drops the user at once (others at their next assembly for
        them, by the change feed)."""
        with unit_of_work(self.url) as session:
            purged = memory_changes.purge(
                session,
                user_id,
                memory_id,
                actor=self._actor(actor),
                embed=self.embedder.embed,
                embedding_model=self.embedder.name,
            )
        self.contexts.forget(user_id)
        return purged

    @checked("user_id")
    def lift_fingerprints(self, user_id: str) -> int:
        """Delete the fingerprints the user's purges left (memory_changes.purge): the
        purged facts may be learned again from later conversations. How many went."""
        with unit_of_work(self.url) as session:
            return fingerprints.lift(session, user_id)

    @checked("user_id", "memory_id")
    def mark_sensitive(
        self, user_id: str, memory_id: str, sensitive: bool = True, *, actor: str | None = None
    ) -> MemoryPublic:
        with unit_of_work(self.url) as session:
            return memory_changes.set_sensitive(
                session, user_id, memory_id, sensitive, actor=self._actor(actor)
            )

    @checked("user_id", "memory_id")
    def update_memory(
        self,
        user_id: str,
        memory_id: str,
        patch: MemoryPatch | Mapping[str, Any] | None = None,
        *,
        actor: str | None = None,
        **fields: Any,
    ) -> MemoryPublic:
        """Correct and curate a memory in one transaction: any of content, category,
        importance, confidence, expires_at (MemoryEdit: a new content re-keys and
        re-embeds it; expires_at=None clears the expiry), tier, status and sensitive,
        given as a MemoryPatch, a mapping or keywords. Left out (or None): kept.
        Restoring (status active) comes first, so a forgotten memory can be restored and
        corrected at once; forgetting or quarantining comes last. A new content that
        another active memory already says (the dedup rule) is refused (ConflictError):
        an edit makes no second copy of a fact."""
        given = dict(
            patch.model_dump(include=patch.model_fields_set)
            if isinstance(patch, MemoryPatch)
            else patch or {}
        )
        given.update(fields)
        # The facade may also set `superseded` (the API's patch may not).
        status: MemoryStatus | None = given.pop("status", None)
        if status is not None and status not in get_args(MemoryStatus):
            raise InvalidInputError(f"status: one of {', '.join(get_args(MemoryStatus))}")
        try:  # None keeps a field, but an expiry given as None clears it
            wanted = MemoryPatch.model_validate(
                {k: v for k, v in given.items() if v is not None or k == "expires_at"}
            )
        except ValidationError as exc:
            raise InvalidInputError(problems_of(exc, at_most=1)) from None
        correction = MemoryEdit.model_validate(
            wanted.model_dump(include=wanted.model_fields_set & _EDIT_FIELDS)
        )
        new_words = vector = None
        if correction.content is not None:
            new_words = keywords(correction.content)
            vector = self.embedder.embed([correction.content])[0]
        who = self._actor(actor)
        with unit_of_work(self.url) as session:
            if status == "deleted":  # forgetting takes the user's lock (see `forget`)
                memories.user_lock(session, user_id)
            public = rows.to_public(memories.get(session, user_id, memory_id))
            memory_id = public.id
            if correction.category != public.category:  # a memory may keep a removed one
                check_category(correction.category, self.settings.categories, where="category")
            if status == "active":
                public = memory_changes.set_status(session, user_id, memory_id, "active", actor=who)
            if correction.content is not None and new_words is not None:
                memory_changes.refuse_duplicate(
                    session,
                    user_id,
                    memory_id,
                    correction.content,
                    new_words,
                    threshold=self.settings.dedup_threshold,
                    min_keywords=self.settings.dedup_min_keywords,
                )
            if correction.model_fields_set:
                public = memory_changes.edit(
                    session,
                    user_id,
                    memory_id,
                    correction,
                    keywords=new_words,
                    embedding=vector,
                    embedding_model=self.embedder.name,
                    actor=who,
                )
            if wanted.tier is not None:
                public = memory_changes.set_tier(
                    session, user_id, memory_id, wanted.tier, actor=who
                )
            if wanted.sensitive is not None:
                public = memory_changes.set_sensitive(
                    session, user_id, memory_id, wanted.sensitive, actor=who
                )
            if status is not None and status != "active":
                public = memory_changes.set_status(session, user_id, memory_id, status, actor=who)
            return public
