"""The read behind `Memlane.search`: the assembler's store read (the candidates one
assembly reads, with their blended relevance) ranked by `memlane.pipeline.search`.

The read asks for more candidates than an assembly (at least `limit`, and four times as
many when a category or tier filter will drop some) so the filters rarely leave the
answer short.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memlane.models.schemas import MemoryPublic, SearchHit, SearchRequest
from memlane.models.store import assembly_reads
from memlane.models.store.vector_index import wants_hnsw
from memlane.pipeline.records import MemoryRecord
from memlane.pipeline.scoring import Weights, blend_relevance
from memlane.pipeline.search import SearchFilters, search_memories
from memlane.workers.embedders import embed_query

if TYPE_CHECKING:
    from datetime import datetime

    from memlane.facade import Memlane

_PUBLIC_FIELDS = set(MemoryPublic.model_fields)


def public(memory: MemoryRecord) -> MemoryPublic:
    return MemoryPublic.model_validate(memory.model_dump(include=_PUBLIC_FIELDS))


def search(lane: Memlane, request: SearchRequest, *, now: datetime) -> list[SearchHit]:
    s = lane.settings
    query = request.query or None
    embedding = embed_query(lane.embedder, query) if query else None
    widen = 4 if request.category or request.tier else 1
    wanted = assembly_reads.CandidateQuery(
        now=now,
        strategy="scored",
        query_vector=(
            assembly_reads.QueryVector(lane.embedder.name, embedding) if embedding else None
        ),
        query_text=query if lane.lexical_weight > 0 else None,
        top_k=max(s.vector_top_k, request.limit) * widen,
        strategy_top_k=max(s.strategy_top_k, request.limit) * widen,
        lexical_top_k=max(s.lexical_top_k, request.limit) * widen,
        include_sensitive=request.include_sensitive,
        approximate=wants_hnsw(s.vector_index, lane.embedder.capabilities),
    )
    candidates, _ = assembly_reads.read_for_assembly(
        lane.url, request.user_id, wanted, episode_limit=0
    )
    ranked = search_memories(
        candidates.memories,
        user_id=request.user_id,
        query=query,
        relevance=blend_relevance(
            (m.id for m in candidates.memories),
            candidates.relevance,
            candidates.lexical,
            lane.lexical_weight,
        ),
        now=now,
        weights=Weights(**s.weights.model_dump()),
        half_life_hours=s.half_life_hours,
        relevance_floor=s.relevance_floor,
        filters=SearchFilters(
            limit=request.limit,
            categories=(request.category,) if request.category else (),
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
