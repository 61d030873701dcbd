"""The Python facade: the one thing a chat app imports.

from memlane import Memlane
lane = Memlane.from_settings()
lane.enqueue({"conversation_id": "c1", "user_id": "u1", "messages": [...]})
context = lane.assemble("u1", "what stack does the user prefer?", budget_tokens=2000)
prompt = context.text + "\n\n" + user_message
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError
from sqlalchemy.orm import Session

from memlane.background import AccessRecorder, PackWriter
from memlane.config.settings import Settings, SettingsError, load_settings
from memlane.facade_memories import MemoryCuration
from memlane.facade_transfer import UserTransfer
from memlane.fleet_status import StatusCache, fleet_status
from memlane.input_checks import check_text, checked
from memlane.models import migrate
from memlane.models.db import unit_of_work
from memlane.models.schemas import (
    EnqueueResult,
    FleetStatus,
    JobPublic,
    MemoryCreate,
    MemoryPage,
    Remembered,
    SearchHit,
    SearchRequest,
    TranscriptIn,
)
from memlane.models.store import (
    assembly_reads,
    context_items,
    conversation_delete,
    conversations,
    jobs,
    pack_texts,
    users,
)
from memlane.models.store import reembed as reembed_store
from memlane.models.store.vector_index import wants_hnsw
from memlane.models.working_set import WorkingSet
from memlane.pipeline.assembly import assemble_context
from memlane.pipeline.assembly_types import AssembledContext, AssemblyInput
from memlane.pipeline.budget import (
    derive_budget,
    strategy_top_k,
    validate_budget,
)
from memlane.pipeline.cadence import due_windows, why_no_window
from memlane.pipeline.context_format import Style
from memlane.pipeline.errors import (
    BrokerUnavailableError,
    ConfigurationError,
    InvalidInputError,
    TranscriptError,
)
from memlane.pipeline.keywords import keywords
from memlane.pipeline.lexical import normalise_by_max
from memlane.pipeline.records import (
    Category,
    MemoryStatus,
    Procedure,
    SoulBlock,
    SoulKind,
    Tier,
)
from memlane.pipeline.scoring import (
    STRATEGIES,
    Strategy,
    Weights,
    default_lexical_weight,
    hybrid_relevance,
)
from memlane.pipeline.tokens import encoding_for_model
from memlane.workers import sweeper
from memlane.workers.dispatch import Dispatcher, InProcessDispatcher, dispatcher_for
from memlane.workers.embedders import Embedder, embed_query, embedder_for, get_embedder
from memlane.workers.sweeper import SweepResult

log = logging.getLogger("memlane.facade")


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class ReembedRun:
    """What `Memlane.reembed` started: the target (stored name and dimension) and its users."""

    model: str
    dim: int
    user_ids: tuple[str, ...]


def blend_relevance(
    candidates: assembly_reads.AssemblyCandidates, lexical_weight: float
) -> dict[str, float]:
    """Each candidate's relevance: `hybrid_relevance` of its cosine (0 without one) and its
    lexical score normalised by the best of the candidates (no lexical signal at all when
    none matched the query's words)."""
    lexical = normalise_by_max(candidates.lexical)
    if not lexical:
        return dict(candidates.relevance)
    return {
        m.id: hybrid_relevance(
            candidates.relevance.get(m.id, 0.0), lexical.get(m.id, 0.0), lexical_weight
        )
        for m in candidates.memories
    }


def parse_transcript(data: TranscriptIn | Mapping[str, Any] | str | bytes) -> TranscriptIn:
    """Validate a transcript; TranscriptError names the message and field at fault."""
    if isinstance(data, TranscriptIn):
        return data
    try:
        if isinstance(data, str | bytes):
            return TranscriptIn.model_validate_json(data)
        return TranscriptIn.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors()[:5]:
            where = ".".join(str(part) for part in error["loc"]) or "transcript"
            problems.append(f"{where}: {str(error['msg']).removeprefix('Value error, ')}")
        more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
        raise TranscriptError("invalid transcript: " + "; ".join(problems) + more) from None


def one_line_of(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _in_batch(index: int, size: int, exc: TranscriptError) -> str:
    """The error of a batch's transcript, saying which one when there are several."""
    if size == 1:
        return str(exc)
    return f"transcript {index} of the batch: {exc}; nothing of the batch was written"


class Memlane(MemoryCuration, UserTransfer):
    """memlane for one process: enqueue transcripts, assemble contexts, manage memories
    (memlane/facade_memories.py). `actor` names who makes the changes it records in
    memories' histories (`python` unless told; the CLI's lane is `cli`)."""

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
        self._stored_embedders: dict[tuple[str, int], Embedder] = {}
        self._packs: PackWriter | None = None
        self._accesses: AccessRecorder | None = None
        self._working: WorkingSet | None = None
        # Held while a member built on first use (the dispatcher, embedder, working set,
        # pack writer, access recorder) is built: two threads arriving together would
        # otherwise each build one, and what went to the one dropped (a pack, an access
        # record, a loaded view) would be lost. Reentrant: building one may need another.
        self._building = threading.RLock()
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
                dispatcher = dispatcher_for(self.settings)
                if isinstance(dispatcher, InProcessDispatcher):
                    # No beat runs for an embedded worker: jobs an earlier process left
                    # queued (or running when it died) would wait forever. Resume them,
                    # but not those this facade queued itself (they are handed over).
                    resumed = sweeper.sweep(self.settings, queued_before=self._started)
                    dispatcher.extract(resumed.extract)
                    dispatcher.store(resumed.store)
                self._dispatcher = dispatcher
            return self._dispatcher

    @property
    def lexical_weight(self) -> float:
        """The relevance blend's w: the setting, or the embedder's default."""
        weight = self.settings.hybrid_lexical_weight
        return default_lexical_weight(self.embedder.lexical) if weight is None else weight

    @property
    def embedder(self) -> Embedder:
        if self._embedder is not None:
            return self._embedder
        with self._building:
            if self._embedder is None:
                self._embedder = get_embedder(self.settings)
            return self._embedder

    def close(self) -> None:
        if self._accesses is not None:
            self._accesses.close()
        if self._packs is not None:
            self._packs.close()
        if self._dispatcher is not None:
            self._dispatcher.close()

    def __enter__(self) -> Memlane:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # ------------------------------------------------------------------ ingest

    def enqueue(self, transcript: TranscriptIn | Mapping[str, Any] | str | bytes) -> EnqueueResult:
        """Store the transcript's messages and the extraction jobs now due, in one
        transaction, then publish the jobs' ids. A malformed transcript raises
        TranscriptError and writes nothing."""
        return self.enqueue_many([transcript])[0]

    def enqueue_many(
        self, transcripts: Sequence[TranscriptIn | Mapping[str, Any] | str | bytes]
    ) -> list[EnqueueResult]:
        """`enqueue` for several transcripts, all or nothing: every one is validated, then
        all are stored in one transaction (one that contradicts what is stored, e.g. a
        message id stored before with other text, raises TranscriptError naming its place
        in the batch, and nothing of any is written), then every job is published."""
        parsed = []
        for index, transcript in enumerate(transcripts):
            try:
                parsed.append(parse_transcript(transcript))
            except TranscriptError as exc:
                raise TranscriptError(_in_batch(index, len(transcripts), exc)) from None
        now = utcnow()
        results: list[EnqueueResult] = []
        with unit_of_work(self.url) as session:
            for index, transcript in enumerate(parsed):
                try:
                    results.append(self._store_transcript(session, transcript, now))
                except TranscriptError as exc:
                    raise TranscriptError(_in_batch(index, len(parsed), exc)) from None
        # Published after the commit: a worker never sees an id before its row exists.
        # If publishing fails the rows stay queued and the sweep publishes them later.
        self._publish("extract", [job_id for result in results for job_id in result.job_ids])
        return results

    def _store_transcript(
        self, session: Session, parsed: TranscriptIn, now: datetime
    ) -> EnqueueResult:
        s = self.settings
        saved = conversations.save_transcript(session, parsed, now=now)
        assistant_seqs = saved.assistant_seqs
        windows = due_windows(
            assistant_seqs=assistant_seqs,
            message_count=saved.message_count,
            extracted_to_seq=saved.extracted_to_seq,
            every=s.extract_every,
            window=s.extract_window,
            final=saved.final,
        )
        job_ids = jobs.create_jobs(
            session,
            conversation_id=saved.conversation_id,
            user_id=saved.user_id,
            windows=windows,
            now=now,
        )
        return EnqueueResult(
            conversation_id=saved.conversation_id,
            stored_messages=saved.stored,
            skipped_messages=saved.skipped,
            job_ids=job_ids,
            ignored_fields=parsed.ignored_fields,
            no_job_reason=None
            if job_ids
            else why_no_window(
                assistant_count=len(assistant_seqs), every=s.extract_every, final=saved.final
            )
            if not windows
            else "its extractions were queued already",
        )

    def wait(
        self, job_ids: Sequence[str], *, timeout: float = 300.0, poll_s: float = 0.2
    ) -> dict[str, str]:
        """Block until the jobs are done or failed (or the timeout); returns their status."""
        deadline = time.monotonic() + timeout
        while True:
            statuses = self.job_statuses(job_ids)
            if all(v in ("done", "failed") for v in statuses.values()):
                return statuses
            if time.monotonic() >= deadline:
                return statuses
            if isinstance(self._dispatcher, InProcessDispatcher):
                self._dispatcher.drain(timeout=poll_s)
            else:
                time.sleep(poll_s)

    def job_statuses(self, job_ids: Sequence[str]) -> dict[str, str]:
        with unit_of_work(self.url) as session:
            return jobs.status_counts(session, job_ids)

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
    ) -> AssembledContext:
        """Build the context block for the user's next model call. Raises BudgetError when
        pinned items and soul blocks alone exceed the budget."""
        if strategy not in STRATEGIES:
            raise ValueError(
                f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}"
            )
        user_id = check_text(user_id, "user_id")  # by hand: the hot path skips the binding
        if query:
            check_text(query, "query")
        s = self.settings
        now = now or utcnow()
        if budget_tokens is not None:
            budget = validate_budget(budget_tokens)
        elif context_window is not None:
            budget = derive_budget(
                context_window=context_window,
                system_prompt_tokens=s.system_prompt_tokens
                if system_prompt_tokens is None
                else system_prompt_tokens,
                user_message_tokens=s.user_message_tokens
                if user_message_tokens is None
                else user_message_tokens,
                output_headroom=s.output_headroom if output_headroom is None else output_headroom,
                safety_margin=s.safety_margin if safety_margin is None else safety_margin,
            )
        else:
            budget = s.default_budget_tokens
        if query_embedding is None and query:
            query_embedding = embed_query(self.embedder, query)
        style = style or s.context_style
        # What both reads hand the assembler; each adds the items it found.
        request = AssemblyInput(
            retrieval_mode="",
            user_id=user_id,
            query=query,
            strategy=strategy,
            budget_tokens=budget,
            now=now,
            encoding=encoding_for_model(model or s.token_model),
            style=style,
            weights=weights or Weights(**s.weights.model_dump()),
            half_life_hours=s.half_life_hours,
            memory_share=s.memory_share,
            relevance_floor=s.relevance_floor,
            include_sensitive=include_sensitive,
        )
        result = None
        if s.working_set_mb > 0 and strategy != "recent":
            result = self._assemble_from_view(request, query_embedding)
        if result is None:
            result = self._assemble_from_store(request, query_embedding)
        # Off the request path: a background thread serialises, logs and saves the pack,
        # and another hands the included ids to the dispatcher a few times a second
        # (accessed_at moves in a worker); neither is waited for.
        self._pack_writer().submit(result.pack_data)
        self._access_recorder().add(result.included_memory_ids, now)
        return result

    def _assemble_from_view(
        self, request: AssemblyInput, query_embedding: Sequence[float] | None
    ) -> AssembledContext | None:
        """Assembly from the user's working set: every item ranked at once, the shortlist
        through the assembler's rules. None when the store read must serve the user: a
        user too large for the working set, or one whose vectors belong to two embedders
        while `memlane reembed` runs. (The `recent` strategy orders by what contexts
        showed, which the working set does not follow: the caller sends it to the store.)"""
        s = self.settings
        embedder = self.embedder
        view = self._working_set().view(request.user_id, model=embedder.name, dim=embedder.dim)
        if view is None:
            return None
        query = request.query
        scores = (
            view.relevance(
                query_vector=query_embedding,
                query_model=embedder.name,
                query_terms=keywords(query),
                lexical_weight=self.lexical_weight,
            )
            if query
            else None
        )
        shortlist = view.shortlist(
            scores,
            strategy=request.strategy,
            now=request.now,
            weights=request.weights,
            half_life_hours=s.half_life_hours,
            relevance_floor=s.relevance_floor,
            include_sensitive=request.include_sensitive,
            limit=view.shortlist_size(request.budget_tokens, request.style, s.walk_margin),
            walk_tokens=s.walk_margin * request.budget_tokens if s.walk_margin > 0 else None,
            style=request.style,
        )
        return assemble_context(
            replace(
                request,
                retrieval_mode="working-set",
                memories=shortlist.memories,
                relevance=shortlist.relevance,
                soul_blocks=view.soul_blocks,
                episodes=shortlist.episodes,
                procedures=shortlist.procedures,
            )
        )

    def _assemble_from_store(
        self, request: AssemblyInput, query_embedding: Sequence[float] | None
    ) -> AssembledContext:
        """Assembly from a candidate read of the store (the working set's fallback)."""
        s = self.settings
        query = request.query
        query_vector = (
            assembly_reads.QueryVector(self.embedder.name, query_embedding)
            if query_embedding
            else None
        )
        wanted = assembly_reads.CandidateQuery(
            now=request.now,
            strategy=request.strategy,
            query_vector=query_vector,
            # weight 0 turns the lexical half off, reads included
            query_text=query if self.lexical_weight > 0 else None,
            # with a query, relevance ranks one pool for the whole budget (assembly rule 4):
            # as many candidates by relevance as the budget holds lines
            top_k=strategy_top_k(request.budget_tokens, 1.0, s.vector_top_k, request.style),
            strategy_top_k=strategy_top_k(
                request.budget_tokens, s.memory_share, s.strategy_top_k, request.style
            ),
            lexical_top_k=strategy_top_k(
                request.budget_tokens, 1.0, s.lexical_top_k, request.style
            ),
            include_sensitive=request.include_sensitive,
            approximate=wants_hnsw(s.vector_index, self.embedder.capabilities),
        )
        candidates, items = assembly_reads.read_for_assembly(
            self.url,
            request.user_id,
            wanted,
            episode_limit=10,
            embed_for=self._query_in(query) if query else None,
        )
        query_words = keywords(query) if query else frozenset()
        return assemble_context(
            replace(
                request,
                retrieval_mode=candidates.retrieval_mode,
                memories=candidates.memories,
                relevance=blend_relevance(candidates, self.lexical_weight),
                soul_blocks=items.soul_blocks,
                episodes=items.episodes,
                procedures=items.procedures,
                procedure_ids=frozenset(p.id for p in items.procedures if p.keywords & query_words),
            )
        )

    @checked("user_id")
    def warm(self, user_id: str) -> bool:
        """Load the user's working set now. A large user's first assemblies otherwise
        read the store while it loads in the background (memlane.models.working_set).
        False when the working set is off or cannot serve the user."""
        if self.settings.working_set_mb <= 0:
            return False
        embedder = self.embedder
        return self._working_set().warm(user_id, model=embedder.name, dim=embedder.dim)

    def _working_set(self) -> WorkingSet:
        if self._working is not None:
            return self._working
        with self._building:
            if self._working is None:
                self._working = WorkingSet(self.url, budget_mb=self.settings.working_set_mb)
            return self._working

    def _query_in(self, query: str) -> Callable[[str, int], list[float] | None]:
        """The query embedded by another embedder, named as its vectors are stored: for
        memories a `memlane reembed` has not moved yet. None (cosine left out, the
        lexical signal still counts) when that embedder cannot be built or called."""

        def embed(model: str, dim: int) -> list[float] | None:
            try:
                embedder = self._stored_embedders.get((model, dim))
                if embedder is None:
                    embedder = embedder_for(model, self.settings, dim=dim)
                    self._stored_embedders[(model, dim)] = embedder
                return embed_query(embedder, query)
            except Exception as exc:  # a migration must not break assembly
                log.warning("cannot embed the query with %s (%d dims): %s", model, dim, exc)
                return None

        return embed

    def _pack_writer(self) -> PackWriter:
        if self._packs is not None:
            return self._packs
        with self._building:
            if self._packs is None:
                self._packs = PackWriter(self.url)
            return self._packs

    def _access_recorder(self) -> AccessRecorder:
        if self._accesses is not None:
            return self._accesses
        with self._building:
            if self._accesses is None:
                self._accesses = AccessRecorder(self.dispatcher.record_access)
            return self._accesses

    def flush(self, timeout: float = 10.0) -> None:
        """Wait for background writes (packs, access records: published, and run when
        the worker is in-process)."""
        if self._accesses is not None:
            self._accesses.flush()
        if self._packs is not None:
            self._packs.flush(timeout)
        if isinstance(self._dispatcher, InProcessDispatcher):
            self._dispatcher.drain(timeout)

    # ------------------------------------------------------------------ memories

    @checked("user_id", "query")
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
    ) -> list[SearchHit]:
        """The user's memories for a query, best first, with their score and its parts:
        the assembler's read and ranking (memlane.pipeline.search), no budget, no XML.
        `since`: stated or last confirmed at or after that time."""
        from memlane.search_read import search

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
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise InvalidInputError(f"{where}: {first['msg']}") from None
        return search(self, request, now=now or utcnow())

    @checked("user_id", "cursor")
    def memories_page(
        self,
        user_id: str,
        *,
        status: MemoryStatus | None = "active",
        limit: int = 100,
        cursor: str | None = None,
    ) -> MemoryPage:
        """A page of the user's memories, newest first; `next_cursor` (None on the last
        page) asks for the next. Exact however the store changes between pages."""
        from memlane.memory_calls import memories_page

        return memories_page(self, user_id, status=status, limit=limit, cursor=cursor)

    @checked("user_id")
    def remember(self, user_id: str, memory: MemoryCreate | Mapping[str, Any] | str) -> Remembered:
        """Store one fact now, as `add_memory` does: `known` when an active memory
        already says it (confirmed: seen once more), ConflictError when the user asked
        to forget it (memlane.memory_calls)."""
        from memlane.memory_calls import remember

        return remember(self, user_id, memory)

    @checked("user_id")
    def erase_user(self, user_id: str) -> dict[str, int]:
        """Delete every row of the user (messages, conversations, jobs, memories and their
        vectors, episodes, procedures, soul blocks, context packs, the change feed's) in
        one transaction: what "delete my data" asks. Irreversible. Returns the rows
        deleted per table. Every process's working set drops the user at its next
        assembly for them; a task in flight for one of their jobs does nothing."""
        with unit_of_work(self.url) as session:
            counts = users.erase(session, user_id, now=utcnow())
        if self._working is not None:
            self._working.forget(user_id)
        log.info("erased user %s: %s", user_id, counts)
        return counts

    @checked("user_id", "conversation_id")
    def delete_conversation(
        self, user_id: str, conversation_id: str, *, actor: str | None = None
    ) -> dict[str, int]:
        """Delete one of the user's conversations ("delete this chat"): its messages,
        jobs and episodes, and the memories learned only from it; a memory that other
        conversations (or the user) also stated stays, without this one's evidence, and
        one superseded by a deleted memory is active again
        (models/store/conversation_delete.py). Irreversible. What was done, counted."""
        self.flush()  # this process's packs in hand are written, so they can be deleted
        with unit_of_work(self.url) as session:
            counts = conversation_delete.delete_conversation(
                session, user_id, conversation_id, actor=self._actor(actor), now=utcnow()
            )
        log.info("deleted conversation %s of user %s: %s", conversation_id, user_id, counts)
        return counts

    # ------------------------------------------------------------------ soul, procedures

    @checked("user_id", "content")
    def set_soul_block(self, user_id: str, kind: SoulKind, content: str) -> SoulBlock:
        with unit_of_work(self.url) as session:
            return context_items.set_soul_block(
                session, user_id=user_id, kind=kind, content=content, now=utcnow()
            )

    @checked("user_id")
    def soul_blocks(self, user_id: str) -> list[SoulBlock]:
        with unit_of_work(self.url) as session:
            return context_items.soul_blocks(session, user_id)

    @checked("user_id", "name", "content")
    def add_procedure(
        self, user_id: str, name: str, content: str, *, extra_keywords: Iterable[str] = ()
    ) -> Procedure:
        words = keywords(f"{name} {content}") | {w.lower() for w in extra_keywords}
        with unit_of_work(self.url) as session:
            return context_items.add_procedure(
                session,
                user_id=user_id,
                name=name,
                content=content,
                keywords=words,
                now=utcnow(),
            )

    @checked("user_id")
    def procedures(self, user_id: str) -> list[Procedure]:
        with unit_of_work(self.url) as session:
            return context_items.procedures(session, user_id)

    @checked("user_id")
    def delete_soul_block(self, user_id: str, kind: SoulKind) -> None:
        """Delete the user's soul block of that kind (NotFoundError if none); every
        working set drops it at its next assembly for the user."""
        with unit_of_work(self.url) as session:
            context_items.delete_soul_block(session, user_id=user_id, kind=kind)

    @checked("user_id", "procedure")
    def delete_procedure(self, user_id: str, procedure: str) -> str:
        """Delete the user's procedure named by its id or its name; its id."""
        with unit_of_work(self.url) as session:
            return context_items.delete_procedure(session, user_id=user_id, procedure_id=procedure)

    # ------------------------------------------------------------------ re-embedding

    def reembed(self, to: str | None = None, *, dim: int | None = None) -> ReembedRun:
        """Start moving every user whose memories serve vectors of another embedder to
        `to` (a MEMLANE_EMBEDDING_MODEL value; default: the configured one): one task per
        user, on the store queue or the in-process worker. Old vectors keep serving until
        the user's new ones are all there (models/store/reembed.py)."""
        target = self.embedder if to is None else embedder_for(to, self.settings, dim=dim)
        with unit_of_work(self.url) as session:
            users = reembed_store.users_to_reembed(session, model=target.name, dim=target.dim)
        self.dispatcher.reembed(users, target.name, target.dim)
        return ReembedRun(model=target.name, dim=target.dim, user_ids=tuple(users))

    def reembed_done(self, run: ReembedRun, *, wait_s: float = 0.0) -> set[str]:
        """The users of `run` whose memories all serve its model now. With the in-process
        worker, first lets it work for up to `wait_s` seconds."""
        if wait_s > 0:
            if isinstance(self._dispatcher, InProcessDispatcher):
                self._dispatcher.drain(timeout=wait_s)
            else:
                time.sleep(wait_s)
        with unit_of_work(self.url) as session:
            return reembed_store.users_done(session, run.user_ids, model=run.model, dim=run.dim)

    def background_busy(self) -> bool:
        """False when this process's in-process worker has nothing left to run (so waiting
        longer changes nothing); True with a broker, whose workers cannot be seen here."""
        if isinstance(self._dispatcher, InProcessDispatcher):
            return self._dispatcher.pending > 0
        return True

    # ------------------------------------------------------------------ jobs, packs

    @checked("job_id")
    def job(self, job_id: str) -> JobPublic:
        with unit_of_work(self.url) as session:
            return jobs.to_public(jobs.load(session, job_id))

    @checked("user_id")
    def jobs(
        self, *, status: str | None = None, user_id: str | None = None, limit: int = 100
    ) -> list[JobPublic]:
        with unit_of_work(self.url) as session:
            return jobs.list_jobs(session, status=status, user_id=user_id, limit=limit)  # type: ignore[arg-type]

    @checked("job_id")
    def retry_job(self, job_id: str) -> JobPublic:
        with unit_of_work(self.url) as session:
            stuck_after = timedelta(seconds=self.settings.stuck_after_s)
            job = jobs.retry(session, job_id, now=utcnow(), stuck_after=stuck_after)
            public = jobs.to_public(job)
        self._publish(public.stage, [job_id])
        return public

    def sweep(self) -> SweepResult:
        """Publish every queued job again (one whose message never reached the broker,
        or was lost), release jobs stuck past MEMLANE_STUCK_AFTER_S and start the tails of
        idle conversations: what beat's periodic sweep does, at once, for queued jobs of
        any age. Publishing a job twice is harmless: the tasks claim it once."""
        result = sweeper.sweep(self.settings, queued_before=utcnow())
        self._publish("extract", result.extract)
        self._publish("store", result.store)
        return result

    def status(self) -> FleetStatus:
        """Whether workers answer for each queue, and the queues' depths: `ok` or
        `degraded` (memlane.fleet_status); checked at most every few seconds."""
        return self._status.get()

    def _publish(self, stage: str, job_ids: Sequence[str]) -> None:
        """Hand job ids to the fleet; a broker that cannot take them is a
        BrokerUnavailableError saying the jobs stay queued for the sweep."""
        if not job_ids:
            return
        try:
            (self.dispatcher.extract if stage == "extract" else self.dispatcher.store)(job_ids)
        except Exception as exc:
            if isinstance(self._dispatcher, InProcessDispatcher):
                raise
            raise BrokerUnavailableError(
                f"the broker (MEMLANE_BROKER_URL) did not take {len(job_ids)} job(s) "
                f"({type(exc).__name__}: {one_line_of(exc)}); they are stored and stay queued: "
                "beat's sweep publishes them, or run `memlane jobs sweep` once the broker is back",
                job_ids=list(job_ids),
            ) from exc

    @checked("pack_id")
    def pack(self, pack_id: str, *, with_texts: bool = False) -> dict[str, Any]:
        """A stored context pack. `with_texts`: each item also gets `text`, its text as
        stored now (None once purged or erased; the pack itself keeps no contents)."""
        with unit_of_work(self.url) as session:
            pack = context_items.get_pack(session, pack_id)
            if with_texts:
                items = pack.get("items", [])
                texts = pack_texts.item_texts(session, pack["user_id"], items)
                pack["items"] = [{**item, "text": texts.get(item["id"])} for item in items]
            return pack
