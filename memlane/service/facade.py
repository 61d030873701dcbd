"""The Python facade: the one thing a chat app imports.

from memlane import Memlane
lane = Memlane.from_settings()
lane.enqueue({"conversation_id": "c1", "user_id": "u1", "messages": [...]})
context = lane.assemble("u1", "what stack does the user prefer?", budget_tokens=2000)
prompt = context.text + "\n\n" + user_message
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from memlane.config.settings import Settings, SettingsError, load_settings
from memlane.models import migrate
from memlane.models.db import unit_of_work
from memlane.models.schemas import SearchHit, SearchRequest
from memlane.models.store.conversations import delete as conversation_delete
from memlane.models.store.reads import pack_texts
from memlane.models.store.users import erase as users
from memlane.models.store.users import packs
from memlane.pipeline.assembly.budget import BudgetAsk
from memlane.pipeline.assembly.context_format import Style
from memlane.pipeline.assembly.records import AssembledContext
from memlane.pipeline.errors import ConfigurationError, InvalidInputError, problems_of
from memlane.pipeline.metadata.filters import filter_of
from memlane.pipeline.ranking.scoring import STRATEGIES, Strategy, Weights
from memlane.pipeline.records import Category, Tier
from memlane.service import search
from memlane.service.context_builder import ContextBuilder
from memlane.service.fleet_status import StatusCache, fleet_status
from memlane.service.ingest import TranscriptIngest, utcnow
from memlane.service.input_checks import check_category, check_text, checked
from memlane.service.items import ContextItemControl
from memlane.service.jobs import JobControl, ReembedRun
from memlane.service.memories import MemoryCuration
from memlane.service.transfer import UserTransfer
from memlane.workers.dispatch import Dispatcher, dispatcher_for
from memlane.workers.embedders import Embedder, get_embedder
from memlane.workers.warmup import warm_server

__all__ = ["Memlane", "ReembedRun"]

log = logging.getLogger("memlane.facade")


class Memlane(TranscriptIngest, MemoryCuration, ContextItemControl, UserTransfer, JobControl):
    """memlane for one process: enqueue transcripts (service/ingest.py), assemble contexts
    (memlane/service/context_builder.py), manage memories (service/memories.py), soul blocks and
    procedures (service/items.py), move users (service/transfer.py) and watch background
    work (service/jobs.py). `actor` names who makes the changes it records in memories'
    histories (`python` unless told; the CLI's lane is `cli`)."""

    def __init__(
        self,
        settings: Settings,
        *,
        dispatcher: Dispatcher | None = None,
        actor: str = "python",
    ) -> None:
        self.settings = settings
        self.actor = actor
        self.url = settings.resolved_database_url
        self._started = utcnow()
        self._dispatcher = dispatcher
        self._embedder: Embedder | None = None
        self._store_checked = False  # for vectors of another embedder, on first use
        # Held while the dispatcher or the embedder is built on first use: two threads
        # arriving together would otherwise each build one (two in-process workers).
        self._building = threading.Lock()
        self.contexts = ContextBuilder(
            settings, embedder=lambda: self.embedder, dispatcher=lambda: self.dispatcher
        )
        self._status = StatusCache(lambda: fleet_status(settings))
        self._check_schema()

    @classmethod
    def from_settings(cls, **overrides: Any) -> Memlane:
        """Settings from the environment; a bad one is a ConfigurationError naming it (the
        front door's error for it: config raises a plain SettingsError, importing nothing
        of the project)."""
        try:
            settings = load_settings(**overrides)
        except SettingsError as exc:
            raise ConfigurationError(str(exc)) from exc
        return cls(settings)

    # ------------------------------------------------------------------ plumbing

    def _check_schema(self) -> None:
        if migrate.is_up_to_date(self.url):
            return
        if not self.settings.is_postgres:
            migrate.upgrade(self.url)  # the embedded default sets itself up
            return
        raise ConfigurationError(
            "the database schema is not up to date; run `memlane db upgrade` "
            "(MEMLANE_DATABASE_URL points at it)"
        )

    @property
    def dispatcher(self) -> Dispatcher:
        if self._dispatcher is not None:
            return self._dispatcher
        with self._building:
            if self._dispatcher is None:
                self._dispatcher = dispatcher_for(self.settings, started=self._started)
            return self._dispatcher

    @property
    def lexical_weight(self) -> float:
        """The relevance blend's w: the setting, or the embedder's default."""
        return self.contexts.lexical_weight

    @property
    def embedder(self) -> Embedder:
        if self._embedder is not None:
            return self._embedder
        with self._building:
            if self._embedder is None:
                self._embedder = get_embedder(self.settings)
                if not self._store_checked:
                    self._store_checked = True
                    self.warn_of_stale_embedders(self._embedder)
            return self._embedder

    def close(self) -> None:
        self.contexts.close()
        if self._dispatcher is not None:
            self._dispatcher.close()

    def __enter__(self) -> Memlane:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # ------------------------------------------------------------------ assemble

    def assemble(
        self,
        user_id: str,
        query: str | None = None,
        *,
        strategy: Strategy = "scored",
        budget_tokens: int | None = None,
        context_window: int | None = None,
        system_prompt_tokens: int | None = None,
        user_message_tokens: int | None = None,
        output_headroom: int | None = None,
        safety_margin: float | None = None,
        model: str | None = None,
        now: datetime | None = None,
        include_sensitive: bool = False,
        query_embedding: Sequence[float] | None = None,
        weights: Weights | None = None,
        style: Style | None = None,
        agent_id: str | None = None,
        filter: Mapping[str, Any] | str | None = None,  # the API's word
    ) -> AssembledContext:
        """Build the context block for the user's next model call (memlane.service.context_builder).
        `agent_id`: assemble for that agent, from the user's shared items and its own;
        without one, from the shared items only (memlane.pipeline.scope).
        The budget: `budget_tokens`, else what `context_window` leaves after the
        reservations (each None: the setting), else MEMLANE_DEFAULT_BUDGET_TOKENS. Raises
        BudgetError when pinned items and soul blocks alone exceed the budget. `filter`:
        only memories and episodes whose metadata passes it (docs/metadata.md); a
        malformed one is a MetadataError naming the bad part."""
        if strategy not in STRATEGIES:
            raise ValueError(
                f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}"
            )
        user_id = check_text(user_id, "user_id")  # by hand: the hot path skips the binding
        if agent_id is not None:
            agent_id = check_text(agent_id, "agent_id")
        if query:
            check_text(query, "query")
        where = filter_of(filter)
        budget = BudgetAsk(
            budget_tokens=budget_tokens,
            context_window=context_window,
            system_prompt_tokens=system_prompt_tokens,
            user_message_tokens=user_message_tokens,
            output_headroom=output_headroom,
            safety_margin=safety_margin,
        )
        return self.contexts.build(
            user_id,
            query,
            strategy=strategy,
            budget=budget,
            model=model,
            now=now,
            include_sensitive=include_sensitive,
            query_embedding=query_embedding,
            weights=weights,
            style=style,
            agent_id=agent_id,
            where=where,
        )

    @checked("user_id")
    def warm(self, user_id: str) -> bool:
        """Load the user's working set now. A large user's first assemblies otherwise
        read the store while it loads in the background (memlane.models.working_set).
        Every line's tokens are counted too (default model and style): a new question's
        assembly then need not count the lines it meets first. False when the working
        set is off or cannot serve the user."""
        return self.contexts.warm(user_id)

    def warm_process(self) -> dict[str, float]:
        """Load now what this process's first assembly would (the tokenizer, the
        embedder's model, the working set's read, the dispatcher): `memlane serve` calls
        it before it answers anything. The milliseconds each part took
        (memlane.workers.warmup)."""
        return warm_server(self.settings, self.embedder, self.warm, lambda: self.dispatcher)

    def flush(self, timeout: float = 10.0) -> None:
        """Wait for background writes (packs, access records: published, and run when
        the worker is in-process)."""
        self.contexts.flush(timeout)
        if self._dispatcher is not None and self._dispatcher.pending:
            self._dispatcher.drain(timeout)

    # ------------------------------------------------------------------ memories

    @checked("user_id", "query", "agent_id")
    def search(
        self,
        user_id: str,
        query: str | None = None,
        *,
        limit: int = 10,
        category: Category | None = None,
        tier: Tier | None = None,
        min_score: float = 0.0,
        since: datetime | None = None,
        include_sensitive: bool = False,
        now: datetime | None = None,
        agent_id: str | None = None,
        filter: Mapping[str, Any] | str | None = None,  # the API's word
    ) -> list[SearchHit]:
        """The user's memories for a query, best first, with their score and its parts:
        the assembler's read and ranking (memlane.pipeline.ranking.search), no budget, no XML.
        `since`: stated or last confirmed at or after that time."""
        raw_filter = filter
        if isinstance(filter, str):
            filter_of(filter)  # text that is no JSON: its MetadataError says so
            raw_filter = json.loads(filter)
        try:
            request = SearchRequest(
                user_id=user_id,
                query=query,
                limit=limit,
                category=category,
                tier=tier,
                min_score=min_score,
                since=since,
                include_sensitive=include_sensitive,
                agent_id=agent_id,
                filter=raw_filter,
            )
        except ValidationError as exc:
            raise InvalidInputError(problems_of(exc, at_most=1)) from None
        check_category(request.category, self.settings.categories, where="category")
        return search.search(
            request,
            url=self.url,
            settings=self.settings,
            embedder=self.embedder,
            lexical_weight=self.lexical_weight,
            now=now or utcnow(),
            embed_for=self.contexts.query_in(query) if query else None,
        )

    @checked("user_id")
    def erase_user(self, user_id: str) -> dict[str, int]:
        """Delete every row of the user (messages, conversations, jobs, memories and their
        vectors, episodes, procedures, soul blocks, context packs, the change feed's) in
        one transaction: what "delete my data" asks. Irreversible. Returns the rows
        deleted per table. Every process's working set drops the user at its next
        assembly for them; a task in flight for one of their jobs does nothing."""
        with unit_of_work(self.url) as session:
            counts = users.erase(session, user_id, now=utcnow())
        self.contexts.forget(user_id)
        log.info("erased user %s: %s", user_id, counts)
        return counts

    @checked("user_id", "conversation_id")
    def delete_conversation(
        self, user_id: str, conversation_id: str, *, actor: str | None = None
    ) -> dict[str, int]:
        """Delete one of the user's conversations ("delete this chat"): its messages,
        jobs and episodes, and the memories learned only from it; a memory that other
        conversations (or the user) also stated stays, without this one's evidence, and
        one superseded by a deleted memory is active again; the deleted memories leave
        a purge's fingerprint and are taken out of what was derived from them
        (models/store/conversations/delete.py). Irreversible. What was done, counted."""
        self.flush()  # this process's packs in hand are written, so they can be deleted
        with unit_of_work(self.url) as session:
            counts = conversation_delete.delete_conversation(
                session,
                user_id,
                conversation_id,
                actor=self._actor(actor),
                now=utcnow(),
                embed=self.embedder.embed,
                embedding_model=self.embedder.name,
            )
        self.contexts.forget(user_id)  # others' working sets follow the change feed
        log.info("deleted conversation %s of user %s: %s", conversation_id, user_id, counts)
        return counts

    @checked("pack_id")
    def pack(self, pack_id: str, *, with_texts: bool = False) -> dict[str, Any]:
        """A stored context pack. `with_texts`: each item also gets `text`, its text as
        stored now (None once purged or erased; the pack itself keeps no contents)."""
        with unit_of_work(self.url) as session:
            pack = packs.get_pack(session, pack_id)
            if with_texts:
                items = pack.get("items", [])
                texts = pack_texts.item_texts(session, pack["user_id"], items)
                pack["items"] = [{**item, "text": texts.get(item["id"])} for item in items]
            return pack
