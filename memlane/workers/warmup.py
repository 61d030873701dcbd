"""Warm a process at start: pay its imports and model loads before it takes work, so no
job's latency_ms and no first request carries them.

What is paid here, once per process: litellm's import and its completion path (a mocked
completion: no network, no cost), the OpenAI client the extractor hands litellm, the
embedder's model (minilm's ONNX session; a remote embedder is only imported, never
called), the tokenizer budgets are counted with, and the language detector's model.
Each part is timed and logged; a part that fails is logged and skipped (the job that
needs it reports the error then).

Celery (memlane.workers.app): `celeryd_after_setup` runs in the worker's main process for
every pool, once its logging is set up and before its pool starts (a prefork pool forks
then); `worker_process_init` runs in each prefork child and, since Celery 4.4, in the solo
pool's process, but not with the threads pool. So imports are paid in the main process
(forked children inherit them), and what belongs to a process (clients, an ONNX session,
whose threads do not survive a fork) in `worker_process_init`, or in the main process
when the pool does not fork. `memlane serve` warms through
`Memlane.warm_process` in its lifespan, before uvicorn answers anything.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from memlane.config.settings import Settings

log = logging.getLogger("memlane.warmup")
# A process is warmed once: a prefork child has a pid of its own, so it warms again.
_warmed_in: set[tuple[int, str]] = set()
WARM_UP_USER = "memlane-warm-up"  # read, never written: an empty view


@contextmanager
def _part(timings: dict[str, float], name: str) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    except Exception as exc:  # a warm-up must never stop a process from starting
        log.warning(
            "warm-up: %s failed (%s: %s); the first call pays it", name, type(exc).__name__, exc
        )
    finally:
        timings[name] = round((time.perf_counter() - started) * 1000, 1)


def _once(kind: str, warm: Callable[[], dict[str, float]]) -> dict[str, float]:
    key = (os.getpid(), kind)
    if key in _warmed_in:
        return {}
    _warmed_in.add(key)
    started = time.perf_counter()
    timings = warm()
    total = (time.perf_counter() - started) * 1000
    parts = ", ".join(f"{name} {ms:.0f} ms" for name, ms in timings.items())
    log.info("%s warmed in %.0f ms (%s)", kind, total, parts)
    return timings


def on_worker_start(worker: Any) -> None:
    """Celery's `celeryd_after_setup` (the worker's main process, its logging set up, its
    pool not started yet): the imports, and everything when the pool does not fork."""
    from memlane.config.settings import get_settings

    settings = get_settings()
    warm_imports(settings)
    if not _forks(worker):
        warm_worker(settings)


def on_worker_process_init() -> None:
    """Celery's `worker_process_init` (a prefork child, the solo pool): everything."""
    from memlane.config.settings import get_settings

    warm_worker(get_settings())


def _forks(worker: Any) -> bool:
    from celery.concurrency import get_implementation

    pool = get_implementation(getattr(worker, "pool_cls", None) or "prefork")
    return str(getattr(pool, "__module__", "")).endswith(".prefork")


def warm_imports(settings: Settings) -> dict[str, float]:
    """Import what a job needs (safe before a fork: nothing per process is built)."""

    def warm() -> dict[str, float]:
        timings: dict[str, float] = {}
        with _part(timings, "imports"):
            from memlane.workers import runner  # noqa: F401  (the stages and the store)
        if settings.llm_model is not None:
            with _part(timings, "litellm import"):
                from memlane.workers.llm import load_litellm

                load_litellm()
                import litellm.llms.openai.common_utils  # noqa: F401  (openai_client's)
        return timings

    return _once("worker imports", warm)


def warm_worker(settings: Settings) -> dict[str, float]:
    """Everything a job of this process needs: the imports, the LLM call's path and
    client, the embedder's model, the tokenizer."""

    def warm() -> dict[str, float]:
        timings = warm_imports(settings) or {}
        if settings.llm_model is not None:
            with _part(timings, "llm path"):
                _warm_llm(settings)
        timings.update(_warm_models(settings))
        return timings

    return _once("worker", warm)


def warm_server(
    settings: Settings,
    embedder: Any,
    warm_view: Callable[[str], object],
    dispatcher: Callable[[], object],
) -> dict[str, float]:
    """What an assembly needs before the first request: the tokenizer and the embedder's
    model (the lane's `embedder`), the working set's read (`warm_view`, the lane's `warm`,
    for a user id no one has: its statements compiled, nothing written) and the
    dispatcher an assembly hands its access records to (the lane's, built)."""

    def warm() -> dict[str, float]:
        timings = _warm_models(settings, embedder)
        with _part(timings, "assembly read"):
            warm_view(WARM_UP_USER)
        with _part(timings, "dispatcher"):
            dispatcher()
        return timings

    return _once("server", warm)


def _warm_models(settings: Settings, embedder: Any = None) -> dict[str, float]:
    timings: dict[str, float] = {}
    with _part(timings, "tokenizer"):
        from memlane.pipeline.assembly.tokens import count_tokens, encoding_for_model

        count_tokens("warm up", encoding_for_model(settings.token_model))
    with _part(timings, "embedder"):
        if embedder is None:
            from memlane.workers.embedders import get_embedder

            embedder = get_embedder(settings)
        from memlane.workers.embedders.litellm import LiteLLMEmbedder

        if not isinstance(embedder, LiteLLMEmbedder):  # local: load its model now
            embedder.embed(["warm up"])
    with _part(timings, "language detector"):
        from memlane.pipeline.language.detect import detector_available

        detector_available()  # loads fastText's model (~40 ms): every message is detected
    return timings


def _warm_llm(settings: Settings) -> None:
    """One mocked completion through litellm, as `call_extraction_llm` makes it: litellm
    imports much of its completion and cost path on the first call."""
    from memlane.pipeline.extraction.extract import parse_extraction
    from memlane.pipeline.extraction.prompts import build_extraction_messages
    from memlane.pipeline.records import ExtractionWindow, StoredMessage
    from memlane.workers.llm import _cost, load_litellm, openai_client

    assert settings.llm_model is not None
    model = settings.llm_model
    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    message = StoredMessage(
        conversation_id="warm-up",
        seq=0,
        role="user",
        content="warm up",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    window = ExtractionWindow(
        conversation_id="warm-up", user_id="warm-up", messages=[message], new_from_seq=0
    )
    answer = '{"memories": [], "episode": null}'
    litellm = load_litellm()
    response = litellm.completion(
        model=model,
        messages=build_extraction_messages(window, max_memories=1, categories=settings.categories),
        api_base=settings.llm_api_base,
        api_key=key,
        client=openai_client(model, settings.llm_api_base, key),
        response_format={"type": "json_object"},
        temperature=0,
        num_retries=0,
        max_retries=0,
        drop_params=True,
        mock_response=answer,
    )
    _cost(litellm, response)
    parse_extraction(answer, max_memories=1, categories=settings.categories)
