"""The assemble use case (`Memlane.assemble`): the budget, the query's embedding, the
user's items from the working set or a candidate read of the store, the assembler
(memlane.pipeline.assembly.assembler), and what it decided handed to background threads (the pack
to save, the included memories' access records). The facade checks the arguments and
calls `ContextBuilder.build`; the rules live in `pipeline/`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime

from memlane.config.settings import Settings
from memlane.models.db import read_unit
from memlane.models.store.memories.vector_index import wants_hnsw
from memlane.models.store.reads import assembly as assembly_reads
from memlane.models.store.reads import metadata_reads, replies
from memlane.models.working_set import WorkingSet
from memlane.pipeline.assembly.assembler import assemble_context
from memlane.pipeline.assembly.budget import (
    BudgetAsk,
    BudgetDefaults,
    resolve_budget,
    strategy_top_k,
)
from memlane.pipeline.assembly.context_format import Style
from memlane.pipeline.assembly.exact_walk import assemble_from_view, count_lines
from memlane.pipeline.assembly.filters import procedures_for_query
from memlane.pipeline.assembly.parts import forget_rendered_texts
from memlane.pipeline.assembly.records import AssembledContext, AssemblyInput
from memlane.pipeline.assembly.replies import askers
from memlane.pipeline.assembly.tokens import encoding_for_model
from memlane.pipeline.dedup.keywords import keywords
from memlane.pipeline.metadata.filters import Filter
from memlane.pipeline.ranking.scoring import (
    Strategy,
    Weights,
    blend_relevance,
    default_lexical_weight,
)
from memlane.pipeline.ranking.time_window import time_window, weigh_items, weigh_rows
from memlane.pipeline.records import MemoryRecord
from memlane.service.background import AccessRecorder, PackWriter
from memlane.workers.dispatch import Dispatcher
from memlane.workers.embedders import Embedder, embed_query, embedder_for

# The facade's logger still: its warnings kept the name operators filter them by.
log = logging.getLogger("memlane.facade")

# The store read's episodes: the most recent, as many as a context shows at most in
# practice (the working set ranks every episode instead).
EPISODES_READ = 10


class ContextBuilder:
    """Builds one process's contexts. What it makes on first use (the working set, the
    pack writer, the access recorder) is made once however many threads arrive."""

    def __init__(
        self,
        settings: Settings,
        *,
        embedder: Callable[[], Embedder],
        dispatcher: Callable[[], Dispatcher],
    ) -> None:
        self.settings = settings
        self.url = settings.resolved_database_url
        # Made by the facade on first use: an assembly needs the embedder, and its access
        # records the dispatcher, but a facade that never assembles makes neither here.
        self._embedder = embedder
        self._dispatcher = dispatcher
        self._budgets = BudgetDefaults(
            budget_tokens=settings.default_budget_tokens,
            system_prompt_tokens=settings.system_prompt_tokens,
            user_message_tokens=settings.user_message_tokens,
            output_headroom=settings.output_headroom,
            safety_margin=settings.safety_margin,
        )
        self._stored_embedders: dict[tuple[str, int], Embedder] = {}
        self._working: WorkingSet | None = None
        self._packs: PackWriter | None = None
        self._accesses: AccessRecorder | None = None
        # Two threads arriving together would otherwise each make a member, and what
        # went to the one dropped (a pack, an access record, a loaded view) would be lost.
        self._building = threading.Lock()

    @property
    def lexical_weight(self) -> float:
        """The relevance blend's w: the setting, or the embedder's default."""
        weight = self.settings.hybrid_lexical_weight
        return default_lexical_weight(self._embedder().lexical) if weight is None else weight

    def build(
        self,
        user_id: str,
        query: str | None,
        *,
        strategy: Strategy,
        budget: BudgetAsk,
        model: str | None,
        now: datetime | None,
        include_sensitive: bool,
        query_embedding: Sequence[float] | None,
        weights: Weights | None,
        style: Style | None,
        record: bool = True,
        agent_id: str | None = None,
        where: Filter | None = None,
    ) -> AssembledContext:
        """The context of `Memlane.assemble` (its arguments, checked by the facade).
        `record=False` writes nothing: no pack saved, no access recorded (the
        inspector's playground, memlane.service.inspector.playground). `where`: only
        memories and episodes whose metadata passes it."""
        s = self.settings
        now = now or datetime.now(UTC)
        budget_tokens = resolve_budget(budget, self._budgets)
        if query_embedding is None and query:
            query_embedding = embed_query(self._embedder(), query)
        # What both reads hand the assembler; each adds the items it found.
        request = AssemblyInput(
            retrieval_mode="",
            user_id=user_id,
            query=query,
            strategy=strategy,
            budget_tokens=budget_tokens,
            now=now,
            encoding=encoding_for_model(model or s.token_model),
            style=style or s.context_style,
            # the time the query names weighs relevance, which only `scored` reads
            time_window=time_window(query, now) if query and strategy == "scored" else None,
            weights=weights or Weights(**s.weights.model_dump()),
            half_life_hours=s.half_life_hours,
            memory_share=s.memory_share,
            relevance_floor=s.relevance_floor,
            include_sensitive=include_sensitive,
            agent_id=agent_id,
        )
        result = None
        if s.working_set_mb > 0 and strategy != "recent":
            result = self._from_view(request, query_embedding, where)
        if result is None:
            result = self._from_store(request, query_embedding, where)
        # Off the request path: a background thread serialises, logs and saves the pack,
        # and another hands the included ids to the dispatcher a few times a second
        # (accessed_at moves in a worker); neither is waited for.
        if not record:
            return result
        self._pack_writer().submit(result.pack_data)
        self._access_recorder().add(result.included_memory_ids, now)
        return result

    def _from_view(
        self,
        request: AssemblyInput,
        query_embedding: Sequence[float] | None,
        where: Filter | None = None,
    ) -> AssembledContext | None:
        """Assembly from the user's working set: every item ranked at once, the shortlist
        through the assembler's rules. None when the store read must serve the user: a
        user too large for the working set, or one whose vectors belong to two embedders
        while `memlane reembed` runs. (The `recent` strategy orders by what contexts
        showed, which the working set does not follow: the caller sends it to the store.)"""
        s = self.settings
        embedder = self._embedder()
        working = self._working_set()
        view = working.view(
            request.user_id,
            model=embedder.name,
            dim=embedder.dim,
            sparse=embedder.capabilities.sparse,
            agent_id=request.agent_id,
        )
        if view is None:
            return None
        allowed = (
            None
            if where is None
            else working.allowed(request.user_id, view, where, agent_id=request.agent_id)
        )
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
        if scores is not None:
            scores = weigh_rows(
                scores,
                request.time_window,
                created=view.created,
                stated=view.stated,
                live=view.corpus.live,
            )
        return assemble_from_view(
            view,
            replace(request, retrieval_mode="working-set"),
            scores,
            walk_margin=s.walk_margin,
            allowed=allowed,
            said_next=lambda askers: read_unit(
                self.url, lambda session: replies.said_next(session, request.user_id, askers)
            ),
        )

    def _from_store(
        self,
        request: AssemblyInput,
        query_embedding: Sequence[float] | None,
        where: Filter | None = None,
    ) -> AssembledContext:
        """Assembly from a candidate read of the store (the working set's fallback)."""
        s = self.settings
        embedder = self._embedder()
        lexical_weight = self.lexical_weight
        query = request.query
        wanted = assembly_reads.CandidateQuery(
            now=request.now,
            strategy=request.strategy,
            query_vector=assembly_reads.QueryVector(embedder.name, query_embedding)
            if query_embedding
            else None,
            # weight 0 turns the lexical half off, reads included
            query_text=query if lexical_weight > 0 else None,
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
            approximate=wants_hnsw(s.vector_index, embedder.capabilities),
            agent_id=request.agent_id,
            where=where,
        )
        candidates, items = assembly_reads.read_for_assembly(
            self.url,
            request.user_id,
            wanted,
            episode_limit=EPISODES_READ,
            embed_for=self.query_in(query) if query else None,
        )
        episodes = items.episodes
        if where is not None and episodes:
            passing = read_unit(
                self.url,
                lambda s: metadata_reads.passing_episodes(
                    s, request.user_id, [e.id for e in episodes], where
                ),
            )
            episodes = [e for e in episodes if e.id in passing]
        relevance = weigh_items(
            blend_relevance(
                (m.id for m in candidates.memories),
                candidates.relevance,
                candidates.lexical,
                lexical_weight,
            ),
            request.time_window,
            candidates.memories,
        )
        return assemble_context(
            replace(
                request,
                retrieval_mode=candidates.retrieval_mode,
                memories=candidates.memories,
                relevance=relevance,
                replies=self._replies(request, wanted, candidates.memories, relevance),
                soul_blocks=items.soul_blocks,
                episodes=episodes,
                procedures=items.procedures,
                procedure_ids=procedures_for_query(items.procedures, query),
            )
        )

    def _replies(
        self,
        request: AssemblyInput,
        wanted: assembly_reads.CandidateQuery,
        memories: Sequence[MemoryRecord],
        relevance: Mapping[str, float],
    ) -> dict[str, MemoryRecord]:
        """The replies rule 4 may walk (pipeline.assembly.replies.askers), read with the
        read's filters."""
        if not request.query or request.strategy != "scored":
            return {}
        asking = askers(memories, relevance, request.relevance_floor)
        if not asking:
            return {}
        return assembly_reads.read_replies(self.url, request.user_id, wanted, asking)

    def query_in(self, query: str) -> Callable[[str, int], list[float] | None]:
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

    # ------------------------------------------------------------------ members

    def warm(self, user_id: str) -> bool:
        """Load the user's working set now and count its lines' tokens in the default
        encoding and style (see `Memlane.warm`)."""
        s = self.settings
        if s.working_set_mb <= 0:
            return False
        embedder = self._embedder()
        view = self._working_set().warm(
            user_id, model=embedder.name, dim=embedder.dim, sparse=embedder.capabilities.sparse
        )
        if view is None:
            return False
        count_lines(view, encoding_for_model(s.token_model), s.context_style)
        return True

    def forget(self, user_id: str) -> None:
        """Drop the user's view, if one was loaded, and the process's caches of rendered
        texts (their data was erased, or a memory of theirs purged): this process keeps
        no copy of what was removed."""
        if self._working is not None:
            self._working.forget(user_id)
        forget_rendered_texts()

    def _working_set(self) -> WorkingSet:
        if self._working is not None:
            return self._working
        with self._building:
            if self._working is None:
                self._working = WorkingSet(self.url, budget_mb=self.settings.working_set_mb)
            return self._working

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
                self._accesses = AccessRecorder(self._dispatcher().record_access)
            return self._accesses

    def flush(self, timeout: float = 10.0) -> None:
        """Hand over the access records held and wait for the packs to be saved."""
        if self._accesses is not None:
            self._accesses.flush()
        if self._packs is not None:
            self._packs.flush(timeout)

    def close(self) -> None:
        if self._accesses is not None:
            self._accesses.close()
        if self._packs is not None:
            self._packs.close()
