"""memlane's settings: one pydantic-settings class, read from `MEMLANE_*` variables and an
optional `.env` file. Nothing is read at import; call `get_settings()`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from difflib import get_close_matches
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from memlane.config.categories import DEFAULT_CATEGORIES, parse_categories

DEFAULT_SQLITE_FILE = "memlane.db"
BUILT_IN_EMBEDDERS = ("hashing", "minilm", "e5-multilingual")
# Celery's transports that memlane's fleet can run on (kombu's aliases of them).
BROKER_SCHEMES = ("redis", "rediss", "sentinel", "amqp", "amqps", "pyamqp", "memory")
# The MEMLANE_* variables that are not settings, each by name (a prefix would hide a typo
# of one): read by the Procfile and compose, the scripts, the tests, the benchmarks and
# the client. tests/unit/test_settings.py fails when a file of the project reads another.
NOT_SETTINGS = (
    "MEMLANE_WORKER_CONCURRENCY",  # Procfile, compose
    "MEMLANE_EXTRACT_CONCURRENCY",  # Procfile, compose
    "MEMLANE_PG_MAJOR",  # scripts/ensure_services.sh
    "MEMLANE_TEST_WORKERS",  # scripts/test.sh
    "MEMLANE_CORE_MAX_MB",  # scripts/check_install.sh
    "MEMLANE_CORE_MAX_S",
    "MEMLANE_TEST_PG_ADMIN",  # tests/scratch.py
    "MEMLANE_TEST_PG_DB",
    "MEMLANE_TEST_REDIS_URL",
    "MEMLANE_TEST_SLOT",
    "MEMLANE_BENCH_PG_ADMIN",  # bench/common.py
    "MEMLANE_BENCH_REDIS_URL",
    "MEMLANE_BENCH_DB_SUFFIX",
    "MEMLANE_CLIENT_URL",  # memlane.client
    "MEMLANE_CLIENT_KEY",
)

_warned: set[str] = set()  # each unknown variable is named once per process


class ScoringWeights(BaseModel):
    """Composite score weights; they must sum to 1 so scores stay in [0, 1]. A plain model,
    set through `MEMLANE_WEIGHTS__RELEVANCE` and its siblings only (a settings class of
    its own would read the unprefixed RELEVANCE, IMPORTANCE, … from the environment)."""

    model_config = ConfigDict(extra="forbid")

    relevance: float = Field(0.40, ge=0.0, le=1.0)
    importance: float = Field(0.30, ge=0.0, le=1.0)
    recency: float = Field(0.20, ge=0.0, le=1.0)
    frequency: float = Field(0.10, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _sum_to_one(self) -> ScoringWeights:
        total = self.relevance + self.importance + self.recency + self.frequency
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"scoring weights must sum to 1.0, got {total:.3f}")
        return self


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="MEMLANE_",
        env_file=".env",
        env_file_encoding="utf-8",
        env_nested_delimiter="__",
        # an empty variable is an unset one: compose passes `${MEMLANE_X:-}` for a setting
        # whose default is unset, and a platform's form may leave a field empty
        env_ignore_empty=True,
        extra="ignore",
    )

    # --- services
    database_url: str | None = Field(
        None, description="SQLAlchemy URL; unset = a SQLite file memlane.db in the working dir"
    )
    broker_url: str | None = Field(
        None, description="Celery broker (redis://…); unset = an in-process worker"
    )
    result_backend: str | None = Field(None, description="Celery result backend (optional)")

    # --- models
    llm_model: str | None = Field(
        None, description="litellm model string; unset = the offline rule-based extractor"
    )
    llm_api_base: str | None = None
    llm_api_key: SecretStr | None = None
    llm_timeout_s: float = Field(30.0, gt=0)
    llm_max_retries: int = Field(5, ge=0, le=20)
    embedding_model: str = Field(
        "minilm",
        min_length=1,
        description=(
            "minilm (the default: all-MiniLM-L6-v2, local, from memlane[embedded]) | hashing "
            "(lexical, no model files) | e5-multilingual (multilingual-e5-small, local, from "
            "memlane[multilingual]) | a litellm embedding model"
        ),
    )
    embedding_dim: int = Field(256, ge=8, le=4096)
    token_model: str = Field("gpt-4o-mini", description="model whose tokenizer counts budgets")

    # --- extraction cadence
    extract_every: int = Field(5, ge=1, description="assistant messages between extractions")
    extract_window: int = Field(20, ge=1, description="messages an extraction reads")
    max_memories_per_extraction: int = Field(10, ge=0, le=10)
    categories: Annotated[tuple[str, ...], NoDecode] = Field(
        DEFAULT_CATEGORIES,
        description="the categories new memories may take: comma-separated or a JSON list",
    )
    idle_after_s: float = Field(1800.0, gt=0, description="idle time before the tail is read")
    stuck_after_s: float = Field(600.0, gt=0, description="job age before the sweep re-enqueues")
    sweep_every_s: float = Field(60.0, gt=0)

    # --- webhooks (memlane.workers.webhooks)
    webhook_every_s: float = Field(
        5.0, gt=0, description="how often beat looks for webhook deliveries due"
    )
    webhook_timeout_s: float = Field(10.0, gt=0, le=120, description="one delivery's HTTP timeout")
    webhook_max_attempts: int = Field(
        8, ge=1, le=50, description="sends of one delivery before it is dead"
    )
    webhook_backoff_s: float = Field(
        10.0, gt=0, description="the wait after a first failed send, doubling after each"
    )
    webhook_max_backoff_s: float = Field(3600.0, gt=0, description="the longest wait between sends")

    # --- retention (enforced by the sweep); None keeps for ever
    message_retention_days: float | None = Field(
        None, gt=0, description="days a message's text is kept (the sweep purges it after)"
    )
    pack_retention_days: float | None = Field(
        None, gt=0, description="days a context pack (its query and items) is kept"
    )

    # --- dedup
    dedup_threshold: float = Field(0.60, gt=0.0, le=1.0)
    dedup_min_keywords: int = Field(3, ge=1)

    # --- scoring
    weights: ScoringWeights = Field(default_factory=ScoringWeights)
    half_life_hours: float = Field(168.0, gt=0)
    hybrid_lexical_weight: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description=(
            "w in relevance = (1 − w)·cosine + w·lexical; 0 = off; unset: 0.7 for the "
            "hashing embedder, 0.3 for others (memlane.pipeline.ranking.scoring)"
        ),
    )

    # --- assembly
    default_budget_tokens: int = Field(4000, ge=1)
    system_prompt_tokens: int = Field(2_000, ge=0)
    user_message_tokens: int = Field(1_000, ge=0)
    output_headroom: int = Field(4_000, ge=0)
    safety_margin: float = Field(0.10, ge=0.0, lt=1.0)
    memory_share: float = Field(
        0.50, gt=0.0, le=1.0, description="memories' share of the budget without a query"
    )
    relevance_floor: float = Field(
        0.8,
        ge=0.0,
        le=1.0,
        description="with a query: items within this share of the best relevance are ranked "
        "by the composite score, the rest by relevance after them",
    )
    context_style: Literal["default", "compact"] = Field(
        "default", description="the context's format: default, or compact for tight budgets"
    )
    working_set_mb: float = Field(
        512,
        ge=0,
        description="per-process memory for users' working sets; 0 = read the store each time",
    )
    walk_margin: float = Field(
        1.0,
        ge=0,
        description="working set: the ranked items the assembler walks first, in budgets of "
        "their estimated lines (what fits after them is walked next: the result is the same "
        "at any margin, only the time differs); 0 = walk every item at once",
    )
    vector_top_k: int = Field(50, ge=1, description="memories fetched by cosine to the query")
    strategy_top_k: int = Field(
        50,
        ge=1,
        description="memories fetched per strategy order; raised to fill big budgets "
        "(memlane.pipeline.assembly.budget.strategy_top_k)",
    )
    lexical_top_k: int = Field(50, ge=1, description="memories fetched by their words alone")
    vector_index: Literal["auto", "hnsw", "exact"] = Field(
        "auto",
        description="HNSW indexes for large users (PostgreSQL): auto = all embedders but hashing",
    )
    hnsw_min_memories: int = Field(
        2000, ge=1, description="memories of one embedder a user needs for an HNSW index"
    )

    # --- front doors
    api_keys: Annotated[list[SecretStr], NoDecode] = Field(default_factory=list)
    max_body_bytes: int = Field(5_000_000, ge=1024)
    allow_unauthenticated: bool = Field(
        False,
        description="let `memlane serve` (and `memlane mcp --transport http`) listen on a "
        "non-loopback address without MEMLANE_API_KEYS (something in front authenticates)",
    )
    mcp_user: str | None = Field(
        None, description="the user whose memories `memlane mcp` serves (or --user)"
    )
    key_pepper: SecretStr | None = Field(
        None, description="the HMAC key stored API keys are hashed under (kept out of the database)"
    )
    key_rate_per_s: float = Field(0.0, ge=0, description="requests/s a key may make; 0 = no limit")
    key_burst: int = Field(20, ge=1, description="requests a key may make at once")
    key_rotation_grace_s: int = Field(
        86_400, ge=0, description="how long a rotated key's old secret stays valid"
    )
    rate_limit_redis_url: str | None = Field(
        None, description="Redis of the rate limits' counters; unset = the broker's Redis"
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"

    @field_validator("log_level", mode="before")
    @classmethod
    def _level_in_capitals(cls, value: object) -> object:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("embedding_model")
    @classmethod
    def _no_near_miss(cls, value: str) -> str:
        # Any other name is a litellm embedding model, so a typo of a built-in one would
        # only fail at the first embedding, blaming the provider.
        near = get_close_matches(value.lower(), BUILT_IN_EMBEDDERS, n=1, cutoff=0.75)
        if value not in BUILT_IN_EMBEDDERS and near and "/" not in value:
            raise ValueError(
                f"{value!r} is not an embedder; did you mean {near[0]!r}? (built in: "
                f"{', '.join(BUILT_IN_EMBEDDERS)}; any other name is a litellm model)"
            )
        return value

    @field_validator("categories", mode="before")
    @classmethod
    def _category_set(cls, value: object) -> object:
        if isinstance(value, str | list | tuple):
            return parse_categories(value)
        return value

    @field_validator("api_keys", mode="before")
    @classmethod
    def _split_keys(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("database_url")
    @classmethod
    def _known_database(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        scheme = value.split("://", 1)[0] if "://" in value else ""
        if scheme in ("postgres", "postgresql"):
            # what platforms hand out; psycopg 3 is the driver memlane ships
            return "postgresql+psycopg://" + value.split("://", 1)[1]
        if not scheme.startswith(("postgresql", "sqlite")):
            raise ValueError(
                "must be a PostgreSQL URL (postgresql://, postgres:// or "
                "postgresql+psycopg://) or a SQLite one (sqlite:///path)"
            )
        return value

    @field_validator("broker_url")
    @classmethod
    def _known_broker(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        scheme = value.split("://", 1)[0].lower() if "://" in value else ""
        if scheme not in BROKER_SCHEMES:
            raise ValueError(
                "must be a broker URL such as redis://127.0.0.1:6379/0 (schemes: "
                f"{', '.join(BROKER_SCHEMES)})"
            )
        return value

    @property
    def resolved_database_url(self) -> str:
        if self.database_url is None and self.broker_url is not None:
            # with a broker, jobs stored here are run by other processes: each would make
            # a memlane.db of its own where it runs, and never see this one's jobs
            raise no_implicit_database("with MEMLANE_BROKER_URL set, memlane")
        return self.database_url or f"sqlite:///{Path.cwd() / DEFAULT_SQLITE_FILE}"

    @property
    def is_postgres(self) -> bool:
        return self.resolved_database_url.startswith("postgresql")

    @property
    def embedded_worker(self) -> bool:
        """True when no broker is configured: jobs run in-process (the embedded default)."""
        return self.broker_url is None

    @property
    def resolved_rate_limit_url(self) -> str | None:
        """Where rate limits count: MEMLANE_RATE_LIMIT_REDIS_URL, else a Redis broker's
        URL, else None (each process counts alone)."""
        if self.rate_limit_redis_url:
            return self.rate_limit_redis_url
        broker = self.broker_url or ""
        return broker if broker.startswith(("redis://", "rediss://")) else None


class SettingsError(ValueError):
    """Settings that do not validate; the message names each variable and what is wrong.

    A ValueError, not one of `memlane.pipeline.errors`: config imports nothing of the
    project (tests/unit/test_layers.py). The CLI treats it as a usage error like any
    ValueError; the API loads its settings before it serves.
    """

    code = "configuration_error"


def no_implicit_database(who: str) -> SettingsError:
    """The refusal to fall back to the SQLite file in the working folder, where that file
    cannot be what the user meant (a server, or processes that share jobs through a
    broker): `who` is the subject of the sentence."""
    return SettingsError(
        f"MEMLANE_DATABASE_URL is not set: {who} does not fall back to a {DEFAULT_SQLITE_FILE} "
        f"of its own in {Path.cwd()}; set MEMLANE_DATABASE_URL to the database every process "
        f"shares (postgresql://user@host/db, or sqlite:///{DEFAULT_SQLITE_FILE} to mean that "
        "file)"
    )


def load_settings(**overrides: object) -> Settings:
    """Build settings, turning a validation error into one that names the variable, and
    warning of a `MEMLANE_*` variable that is no setting (a misspelling, most likely)."""
    for name in unknown_variables(os.environ):
        if name in _warned:
            continue
        _warned.add(name)
        # compared without the prefix all share, which would make any name look close
        known = [known.removeprefix("MEMLANE_") for known in (*setting_variables(), *NOT_SETTINGS)]
        near = get_close_matches(name.removeprefix("MEMLANE_"), known, n=1, cutoff=0.6)
        hint = f"; did you mean MEMLANE_{near[0]}?" if near else ""
        # on stderr itself, not through logging: the CLI shows memlane's log only under
        # --debug, and Celery sets its logging up after the settings are read
        print(f"warning: {name} is not a memlane setting and is ignored{hint}", file=sys.stderr)
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            field = "__".join(str(part) for part in error["loc"])
            problems.append(f"MEMLANE_{field.upper()}: {error['msg']}")
        raise SettingsError("invalid settings: " + "; ".join(problems)) from None


def setting_variables() -> list[str]:
    """Every variable a setting is read from."""
    names = []
    for name, field in Settings.model_fields.items():
        names.append(f"MEMLANE_{name.upper()}")
        if field.annotation is ScoringWeights:
            names += [
                f"MEMLANE_{name.upper()}__{part.upper()}" for part in ScoringWeights.model_fields
            ]
    return names


def unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """The `MEMLANE_*` names in `environ` that are neither settings nor memlane's own."""
    known = set(setting_variables()) | set(NOT_SETTINGS)
    return sorted(name for name in environ if name.startswith("MEMLANE_") and name not in known)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return load_settings()
