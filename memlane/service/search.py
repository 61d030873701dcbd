"""The read behind `Memlane.search`: the assembler's store read (the candidates one
assembly reads, with their blended relevance) ranked by `memlane.pipeline.ranking.search`.

The read asks for more candidates than an assembly (at least `limit`, and four times as
many when a category or tier filter will drop some) so the filters rarely leave the
answer short.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from memlane.config.settings import Settings
from memlane.models.schemas import MemoryPublic, SearchHit, SearchRequest
from memlane.models.store.memories.vector_index import wants_hnsw
from memlane.models.store.reads import assembly as assembly_reads
from memlane.pipeline.metadata.filters import parse_filter
from memlane.pipeline.ranking.scoring import Weights, blend_relevance
from memlane.pipeline.ranking.search import SearchFilters, search_memories
from memlane.pipeline.records import MemoryRecord
from memlane.workers.embedders import Embedder, embed_query

_PUBLIC_FIELDS = set(MemoryPublic.model_fields)


def public(memory: MemoryRecord) -> MemoryPublic:
    return MemoryPublic.model_validate(memory.model_dump(include=_PUBLIC_FIELDS))


def search(
    request: SearchRequest,
    *,
    url: str,
    settings: Settings,
    embedder: Embedder,
    lexical_weight: float,
    now: datetime,
    embed_for: Callable[[str, int], list[float] | None] | None = None,
) -> list[SearchHit]:
    """The user's memories for the request, best first (module docstring). `embed_for`
    embeds the query with another embedder for memories whose vectors are of it (a store
    not yet moved by `memlane reembed`), as the assembler does."""
    s = settings
    query = request.query or None
    embedding = embed_query(embedder, query) if query else None
    widen = 4 if request.category or request.tier else 1
    wanted = assembly_reads.CandidateQuery(
        now=now,
        strategy="scored",
        query_vector=(assembly_reads.QueryVector(embedder.name, embedding) if embedding else None),
        query_text=query if lexical_weight > 0 else None,
        top_k=max(s.vector_top_k, request.limit) * widen,
        strategy_top_k=max(s.strategy_top_k, request.limit) * widen,
        lexical_top_k=max(s.lexical_top_k, request.limit) * widen,
        include_sensitive=request.include_sensitive,
        approximate=wants_hnsw(s.vector_index, embedder.capabilities),
        agent_id=request.agent_id,
        where=parse_filter(request.filter) if request.filter is not None else None,
    )
    candidates, _ = assembly_reads.read_for_assembly(
        url, request.user_id, wanted, episode_limit=0, embed_for=embed_for
    )
    ranked = search_memories(
        candidates.memories,
        user_id=request.user_id,
        query=query,
        relevance=blend_relevance(
            (m.id for m in candidates.memories),
            candidates.relevance,
            candidates.lexical,
            lexical_weight,
        ),
        now=now,
        weights=Weights(**s.weights.model_dump()),
        half_life_hours=s.half_life_hours,
        relevance_floor=s.relevance_floor,
        filters=SearchFilters(
            limit=request.limit,
            in_categories=(request.category,) if request.category else (),
            tiers=(request.tier,) if request.tier else (),
            min_score=request.min_score,
            since=request.since,
            include_sensitive=request.include_sensitive,
        ),
    )
    return [
        SearchHit(
            memory=public(r.memory),
            score=r.breakdown.composite,
            relevance=r.breakdown.relevance,
            importance=r.breakdown.importance,
            recency=r.breakdown.recency,
            frequency=r.breakdown.frequency,
        )
        for r in ranked
    ]
