"""The settings' defaults in the shape the pipeline's functions take them. The pipeline
holds no default of its own for a value a setting decides (memlane.config.settings is
the one source); tests pass these, as memlane's own callers pass the settings."""

from __future__ import annotations

from typing import Any

from memlane.config.settings import ScoringWeights, Settings
from memlane.pipeline.ranking.scoring import Weights


def default(name: str) -> Any:
    """A setting's default, as declared (not as this machine's MEMLANE_* would set it)."""
    field = Settings.model_fields[name]
    return field.default_factory() if field.default_factory else field.default  # type: ignore[call-arg]


WEIGHTS = Weights(**ScoringWeights().model_dump())
HALF_LIFE_HOURS: float = default("half_life_hours")
DEDUP_THRESHOLD: float = default("dedup_threshold")
DEDUP_MIN_KEYWORDS: int = default("dedup_min_keywords")
MAX_MEMORIES: int = default("max_memories_per_extraction")
EXTRACT_EVERY: int = default("extract_every")
EXTRACT_WINDOW: int = default("extract_window")
SAFETY_MARGIN: float = default("safety_margin")
MEMORY_SHARE: float = default("memory_share")
RELEVANCE_FLOOR: float = default("relevance_floor")
EMBEDDING_DIM: int = default("embedding_dim")
# What AssemblyInput takes from the settings.
ASSEMBLY: dict[str, Any] = {
    "weights": WEIGHTS,
    "half_life_hours": HALF_LIFE_HOURS,
    "memory_share": MEMORY_SHARE,
    "relevance_floor": RELEVANCE_FLOOR,
}
CATEGORIES: tuple[str, ...] = tuple(default("categories"))
