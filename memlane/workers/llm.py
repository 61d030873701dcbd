"""The LLM adapter: one extraction call through litellm, its errors sorted by what to do next.

litellm costs seconds and a large share of memory to import (bench/README.md), so it is
imported lazily, on the first call, never by the assembly path or the CLI. Retries are the
task's job (with `compute_backoff`), so litellm and the OpenAI SDK under it are told not
to retry on their own.

For an OpenAI-compatible endpoint (provider `openai`, with MEMLANE_LLM_API_BASE and a key)
litellm is handed one OpenAI client per process and endpoint (`openai_client`), built
once on litellm's own HTTP client (its SSL and proxy settings), instead of looking up its
client cache on every call (bench/README.md).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

from memlane.config.extras import require
from memlane.pipeline.backoff import parse_retry_after
from memlane.pipeline.categories import DEFAULT_CATEGORIES
from memlane.pipeline.errors import ExtractionError
from memlane.pipeline.extraction.extract import parse_extraction
from memlane.pipeline.extraction.prompts import build_extraction_messages
from memlane.pipeline.records import Extraction, ExtractionWindow
from memlane.workers.errors import PermanentProviderError, TransientProviderError

if TYPE_CHECKING:
    import openai

_CONNECTION_FAILED = "Connection error."  # what openai's client says when no answer came

# Statuses below 500 that mean "not now" rather than "never": request timeout, conflict,
# too early, too many requests.
TRANSIENT_STATUSES = frozenset({408, 409, 425, 429})
_DETAIL_CHARS = 300


@dataclass(frozen=True)
class LLMResult:
    extraction: Extraction
    raw: str  # the model's answer as received, kept for the job record
    tokens_in: int | None  # None when the provider reported no usage
    tokens_out: int | None
    cost_usd: float | None  # None when litellm does not know the model's price
    latency_ms: float
    dropped: list[str] = field(default_factory=list)  # why parts of the answer were dropped


def load_litellm() -> ModuleType:
    """Import litellm (once per process) configured for workers: the bundled cost map
    instead of a network fetch, no banner on errors, no retries behind the task's back."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    require("the LLM extractor and embedders (litellm)", "fleet", "litellm")
    import litellm

    litellm.suppress_debug_info = True
    # litellm's OpenAI embedding path reads `max_retries or DEFAULT_MAX_RETRIES`, turning
    # an explicit 0 into 2 SDK retries; with the default at 0, 0 means 0.
    litellm.DEFAULT_MAX_RETRIES = 0  # type: ignore[attr-defined]
    return litellm


def call_extraction_llm(
    window: ExtractionWindow,
    *,
    model: str,
    api_base: str | None,
    api_key: str | None,
    timeout_s: float,
    max_memories: int,
    categories: Sequence[str] = DEFAULT_CATEGORIES,
) -> LLMResult:
    """Ask `model` for the window's memories and episode, each in one of `categories`
    (the configured set, MEMLANE_CATEGORIES).

    Raises TransientProviderError (retry later), PermanentProviderError (never retry) or
    ExtractionError (the answer was unusable; carries the raw answer).
    """
    litellm = load_litellm()
    messages = build_extraction_messages(window, max_memories=max_memories, categories=categories)
    started = time.perf_counter()
    try:
        response = litellm.completion(
            model=model,
            messages=messages,
            api_base=api_base,
            api_key=api_key,
            client=openai_client(model, api_base, api_key),
            timeout=timeout_s,
            response_format={"type": "json_object"},
            temperature=0,
            num_retries=0,
            max_retries=0,
            # Cheap models differ in what they accept (some refuse temperature); drop a
            # parameter the model does not support rather than fail the job for it.
            drop_params=True,
        )
    except Exception as exc:
        error = translate_litellm_error(exc, model=model)
        if error is None:
            raise
        raise error from exc
    latency_ms = (time.perf_counter() - started) * 1000.0
    raw = _answer_text(response)
    if not raw.strip():
        raise ExtractionError(f"{model} returned an empty answer", raw=raw)
    parsed = parse_extraction(raw, max_memories=max_memories, categories=categories)
    usage = getattr(response, "usage", None)
    return LLMResult(
        extraction=parsed.extraction,
        raw=raw,
        tokens_in=_int_or_none(getattr(usage, "prompt_tokens", None)),
        tokens_out=_int_or_none(getattr(usage, "completion_tokens", None)),
        cost_usd=_cost(litellm, response),
        latency_ms=latency_ms,
        dropped=list(parsed.dropped),
    )


def openai_client(model: str, api_base: str | None, api_key: str | None) -> openai.OpenAI | None:
    """The process's OpenAI client for `model` at `api_base`, or None (litellm then picks
    its client itself): only for models litellm serves through its OpenAI provider, with an
    explicit endpoint and key, so the client addresses what litellm would."""
    if api_base is None or api_key is None or _provider(model, api_base) != "openai":
        return None
    return _openai_client(api_base, api_key)


@cache
def _provider(model: str, api_base: str) -> str:
    return str(load_litellm().get_llm_provider(model=model, api_base=api_base)[1])


@cache
def _openai_client(api_base: str, api_key: str) -> openai.OpenAI:
    import openai  # a dependency of litellm, already loaded whenever this runs
    from litellm.llms.openai.common_utils import BaseOpenAILLM

    # No retries of its own (see the module's docstring); the timeout is litellm's, per call.
    # The HTTP client is the one litellm builds for its own OpenAI clients (an httpx one,
    # which openai's SDK, typed for httpx2's, adapts).
    return openai.OpenAI(
        api_key=api_key,
        base_url=api_base,
        max_retries=0,
        http_client=BaseOpenAILLM.get_sync_http_client(),  # type: ignore[arg-type]
    )


def translate_litellm_error(
    exc: BaseException, *, model: str
) -> TransientProviderError | PermanentProviderError | None:
    """Sort an exception raised by litellm into what the caller should do:

    - timeout, connection failure                               → TransientProviderError
    - HTTP 408/409/425/429 or ≥ 500 (RateLimitError,
      InternalServerError, BadGatewayError, ServiceUnavailableError,
      APIError with such a status)                    → TransientProviderError (+ Retry-After)
    - any other 4xx (AuthenticationError, PermissionDeniedError,
      BadRequestError and its kin, NotFoundError, Unprocessable…) → PermanentProviderError
    - a provider error without a status                         → TransientProviderError (bounded)
    - not a provider error at all (a bug of ours)               → None: re-raise it unchanged
    """
    import openai  # a dependency of litellm, already loaded whenever this runs

    exceptions = load_litellm().exceptions
    if not isinstance(exc, openai.OpenAIError):
        return None
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    detail = _detail(exc)
    if isinstance(exc, (exceptions.Timeout, openai.APITimeoutError)):
        return TransientProviderError(
            f"{model} did not answer in time: {detail}", status_code=status
        )
    if isinstance(exc, (exceptions.APIConnectionError, openai.APIConnectionError)) or (
        # litellm reports a refused or broken connection as an HTTP 500 it never received
        status == 500 and _CONNECTION_FAILED in str(exc)
    ):
        return TransientProviderError(
            f"could not reach {model} (no answer over the network; check "
            f"MEMLANE_LLM_API_BASE and that the provider is reachable): {detail}"
        )
    if isinstance(exc, exceptions.RateLimitError) or (
        status is not None and (status in TRANSIENT_STATUSES or status >= 500)
    ):
        return TransientProviderError(
            f"{model} is unavailable (HTTP {status}): {detail}",
            retry_after=retry_after_of(exc),
            status_code=status,
        )
    if status is not None and 400 <= status < 500:
        return PermanentProviderError(
            f"{model} refused the call (HTTP {status}); check MEMLANE_LLM_MODEL, "
            f"MEMLANE_LLM_API_KEY and MEMLANE_LLM_API_BASE: {detail}",
            status_code=status,
        )
    return TransientProviderError(f"{model} failed: {detail}", status_code=status)


def retry_after_of(exc: BaseException) -> float | None:
    """Seconds the provider asked us to wait, from `retry-after-ms` or `retry-after` on the
    response headers litellm keeps (`litellm_response_headers`, else `response.headers`)."""
    headers = getattr(exc, "litellm_response_headers", None)
    if not headers:
        headers = getattr(getattr(exc, "response", None), "headers", None)
    if not isinstance(headers, Mapping):
        return None
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    if "retry-after-ms" in lowered:
        millis = parse_retry_after(lowered["retry-after-ms"], now=datetime.now(UTC))
        if millis is not None:
            return millis / 1000.0
    return parse_retry_after(lowered.get("retry-after"), now=datetime.now(UTC))


def _answer_text(response: Any) -> str:
    try:
        content = response.choices[0].message.content
    except (AttributeError, IndexError, TypeError):
        raise ExtractionError("the model's response has no message", raw=str(response)) from None
    return content if isinstance(content, str) else ""


def _cost(litellm: ModuleType, response: Any) -> float | None:
    # litellm prices every response as it builds it (None when it knows no price): reuse
    # that figure rather than pricing the response a second time.
    hidden = getattr(response, "_hidden_params", None)
    if isinstance(hidden, dict) and "response_cost" in hidden:
        priced = hidden["response_cost"]
        return float(priced) if isinstance(priced, int | float) else None
    try:
        cost = litellm.completion_cost(completion_response=response)
    except Exception:  # unknown model or price: the cost is unknown, the call still succeeded
        return None
    return float(cost) if cost is not None else None


def _int_or_none(value: object) -> int | None:
    return int(value) if isinstance(value, int | float) else None


def _detail(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 1] + "…"
