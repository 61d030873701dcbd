"""One user's items as the assembler ranks them: the records, the relevance index over
all of them (memories, episodes and procedures in one Corpus) and the columns the
composite score needs, so a query ranks the whole store at once (numpy) and only a
shortlist of it goes through the assembler's item-by-item rules.

The shortlist holds every pinned and verified memory and every memory the safety
filter leaves out (the pack names them), and the best `limit` of the rest in the
assembler's own order (assembly rule 4 with a query, the strategy's order without one).
`limit` is set by the caller (`shortlist_size`: twice as many lines as the budget holds
at the user's mean line length), so the assembler's walk ends before the shortlist does.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import numpy.typing as npt

from memlane.models.schemas import EpisodeRecord, MemoryRecord, Procedure, SoulBlock
from memlane.pipeline import context_format as fmt
from memlane.pipeline.budget import MIN_MEMORY_LINE_TOKENS
from memlane.pipeline.keywords import keywords
from memlane.pipeline.relevance import Corpus, CorpusItem, build_corpus, relevance
from memlane.pipeline.scoring import ITEM_IMPORTANCE, Strategy, Weights

FloatArray = npt.NDArray[np.float64]
VectorLike = Sequence[float] | npt.NDArray[np.float32]


def episode_keywords(episode: EpisodeRecord) -> frozenset[str]:
    return keywords(" ".join([fmt.episode_text(episode), *episode.topics]))


def procedure_keywords(procedure: Procedure) -> frozenset[str]:
    return frozenset(procedure.keywords) | keywords(procedure.name)


def _epoch(moment: datetime) -> float:
    return moment.timestamp()


@dataclass(frozen=True, slots=True)
class Shortlist:
    memories: list[MemoryRecord]
    episodes: list[EpisodeRecord]
    procedures: list[Procedure]
    relevance: dict[str, float]


@dataclass(frozen=True, slots=True)
class UserView:
    memories: Sequence[MemoryRecord]
    episodes: Sequence[EpisodeRecord]
    procedures: Sequence[Procedure]
    soul_blocks: Sequence[SoulBlock]
    corpus: Corpus  # rows: memories, then episodes, then procedures
    importance: FloatArray  # per corpus row: importance × (0.5 + 0.5 · confidence), or 0.5
    stated: FloatArray  # epoch seconds: confirmed_at of memories, created_at of the rest
    created: FloatArray  # epoch seconds of created_at
    confirmations: FloatArray  # access_count of memories, 0 for the rest
    expires: FloatArray  # epoch seconds, +inf when never
    sensitive: npt.NDArray[np.bool_]
    free: npt.NDArray[np.bool_]  # candidate-tier memories, episodes, procedures
    mean_chars: float  # of the memories' content

    @classmethod
    def build(
        cls,
        *,
        memories: Sequence[MemoryRecord],
        memory_vectors: Sequence[tuple[str, VectorLike] | None],
        episodes: Sequence[EpisodeRecord],
        episode_vectors: Sequence[tuple[str, VectorLike] | None],
        procedures: Sequence[Procedure],
        soul_blocks: Sequence[SoulBlock],
        model: str | None,
        dim: int | None,
    ) -> UserView:
        """Index the items; `*_vectors[i]` is (embedder, vector) of item i, or None. Only
        vectors of the embedder `model` (of `dim`) count."""
        items = [
            *(
                CorpusItem(m.id, m.keywords, *(pair[::-1] if pair else (None, None)))
                for m, pair in zip(memories, memory_vectors, strict=True)
            ),
            *(
                CorpusItem(e.id, episode_keywords(e), *(pair[::-1] if pair else (None, None)))
                for e, pair in zip(episodes, episode_vectors, strict=True)
            ),
            *(CorpusItem(p.id, procedure_keywords(p)) for p in procedures),
        ]
        others: list[EpisodeRecord | Procedure] = [*episodes, *procedures]
        return cls(
            memories=memories,
            episodes=episodes,
            procedures=procedures,
            soul_blocks=soul_blocks,
            corpus=build_corpus(items, model=model, dim=dim),
            importance=np.array(
                [m.importance * (0.5 + 0.5 * m.confidence) for m in memories]
                + [ITEM_IMPORTANCE] * len(others),
                dtype=np.float64,
            ),
            stated=np.array(
                [_epoch(m.confirmed_at) for m in memories] + [_epoch(o.created_at) for o in others],
                dtype=np.float64,
            ),
            created=np.array(
                [_epoch(m.created_at) for m in memories] + [_epoch(o.created_at) for o in others],
                dtype=np.float64,
            ),
            confirmations=np.array(
                [m.access_count for m in memories] + [0] * len(others), dtype=np.float64
            ),
            expires=np.array(
                [math.inf if m.expires_at is None else _epoch(m.expires_at) for m in memories]
                + [math.inf] * len(others),
                dtype=np.float64,
            ),
            sensitive=np.array(
                [m.sensitive for m in memories] + [False] * len(others), dtype=np.bool_
            ),
            free=np.array(
                [m.tier == "candidate" for m in memories] + [True] * len(others), dtype=np.bool_
            ),
            mean_chars=sum(len(m.content) for m in memories) / len(memories) if memories else 0,
        )

    def mean_line_tokens(self, style: str) -> float:
        """About what a line of this user's items costs: the style's markup (pipeline.budget)
        plus a quarter token per character of the mean content (English text)."""
        return MIN_MEMORY_LINE_TOKENS[style] + self.mean_chars / 4

    def shortlist_size(self, budget_tokens: int, style: str) -> int:
        """How many of the ranked items the assembler walks: twice as many lines as the
        budget holds at this user's mean line, at least 50."""
        return max(50, math.ceil(2 * budget_tokens / self.mean_line_tokens(style)))

    @property
    def size_bytes(self) -> int:
        """About what the view holds in memory: its arrays and its records' text."""
        arrays = self.corpus.vectors.nbytes + 8 * 7 * len(self.corpus)
        text = sum(len(m.content) + 64 * len(m.keywords) for m in self.memories)
        text += sum(len(e.summary) for e in self.episodes)
        return arrays + text + 700 * len(self.corpus)

    def relevance(
        self,
        *,
        query_vector: Sequence[float] | None,
        query_model: str | None,
        query_terms: Collection[str],
        lexical_weight: float,
    ) -> FloatArray:
        """Each row's relevance to the query (pipeline.relevance)."""
        return relevance(
            self.corpus,
            query_vector=query_vector,
            query_model=query_model,
            query_terms=query_terms,
            lexical_weight=lexical_weight,
        )

    def shortlist(
        self,
        relevance: FloatArray | None,
        *,
        strategy: Strategy,
        now: datetime,
        weights: Weights,
        half_life_hours: float,
        relevance_floor: float,
        include_sensitive: bool,
        limit: int,
    ) -> Shortlist:
        """What the assembler needs to see of this user (module docstring)."""
        n_memories = len(self.memories)
        n_episodes = len(self.episodes)
        rows = len(self.corpus)
        rel = np.zeros(rows, dtype=np.float64) if relevance is None else relevance
        hours = np.maximum(0.0, (_epoch(now) - self.stated) / 3600.0)
        recency = np.exp(-math.log(2) * hours / half_life_hours)
        frequency = np.minimum(1.0, np.log10(self.confirmations + 1.0) / 2.0)
        composite = (
            weights.relevance * np.clip(rel, 0.0, 1.0)
            + weights.importance * self.importance
            + weights.recency * recency
            + weights.frequency * frequency
        )
        is_memory = np.arange(rows) < n_memories
        visible = (self.expires > _epoch(now)) & (include_sensitive | ~self.sensitive)
        always = is_memory & (~self.free | ~visible)  # pinned, verified; excluded for the pack
        by_relevance = relevance is not None and strategy == "scored"
        if by_relevance:
            is_procedure = np.arange(rows) >= n_memories + n_episodes
            pool = self.free & visible & (~is_procedure | (rel > 0))
            best = float(rel[pool].max()) if pool.any() else 0.0
            above = rel >= relevance_floor * best
            # assembly rule 4: above the floor by composite, then the rest by relevance
            primary = np.where(above, 0.0, 1.0)
            secondary = np.where(above, -composite, -rel)
            order = np.lexsort((-composite, secondary, primary))
        else:
            pool = self.free & visible & is_memory
            value = {
                "scored": composite,
                "important": np.concatenate(
                    [np.array([m.importance for m in self.memories]), np.zeros(rows - n_memories)]
                ),
                "balanced": self.importance_raw()
                / (1.0 + np.maximum(0.0, (_epoch(now) - self.created) / 3600.0)),
            }.get(strategy, composite)
            order = np.argsort(-value, kind="stable")
            newest = np.argsort(-self.created[n_memories : n_memories + n_episodes], kind="stable")
            pool_episodes = {int(i) + n_memories for i in newest[:limit]}
        ranked = order[pool[order]][:limit]
        keep = set(ranked.tolist()) | set(np.flatnonzero(always).tolist())
        if not by_relevance:
            keep |= pool_episodes | set(range(n_memories + n_episodes, rows))
        rows_kept = sorted(keep)
        ids = self.corpus.ids
        first_episode, first_procedure = n_memories, n_memories + n_episodes
        return Shortlist(
            memories=[self.memories[i] for i in rows_kept if i < first_episode],
            episodes=[
                self.episodes[i - first_episode]
                for i in rows_kept
                if first_episode <= i < first_procedure
            ],
            procedures=[
                self.procedures[i - first_procedure] for i in rows_kept if i >= first_procedure
            ],
            relevance={} if relevance is None else {ids[i]: float(rel[i]) for i in rows_kept},
        )

    def importance_raw(self) -> FloatArray:
        return np.array(
            [m.importance for m in self.memories] + [0.0] * (len(self.corpus) - len(self.memories)),
            dtype=np.float64,
        )
