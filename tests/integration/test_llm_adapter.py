"""The LLM and embedding adapters against the loopback stub, through the real litellm.
No Postgres or Redis needed."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from types import ModuleType

import pytest

from memlane.pipeline.errors import ConfigurationError, ExtractionError
from memlane.pipeline.extraction.prompts import build_extraction_messages
from memlane.pipeline.records import (
    ExtractedEpisode,
    ExtractedMemory,
    ExtractionWindow,
    StoredMessage,
)
from memlane.workers.embedders import LiteLLMEmbedder
from memlane.workers.errors import PermanentProviderError, TransientProviderError
from memlane.workers.llm import call_extraction_llm, load_litellm, openai_client
from tests.defaults import CATEGORIES
from tests.llm_stub import LLMStub, malformed, ok, status, stub_vector, timeout

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
PREFERENCE = {
    "content": "The user prefers TypeScript for frontend code.",
    "category": "preference",
    "importance": 0.8,
    "confidence": 1.0,
}
EPISODE = {"summary": "Chose a frontend language.", "topics": ["typescript"], "outcome": None}


@pytest.fixture(scope="session")
def litellm_module() -> ModuleType:
    return load_litellm()  # ~4 s, once per session


@pytest.fixture
def stub(litellm_module: ModuleType) -> Iterator[LLMStub]:
    with LLMStub() as running:
        yield running


@pytest.fixture
def window() -> ExtractionWindow:
    lines = [
        ("user", "Should the new dashboard be JavaScript or TypeScript?"),
        ("assistant", "Both work; what do you prefer?"),
        ("user", "I always prefer TypeScript for frontend code."),
        ("assistant", "TypeScript it is."),
    ]
    messages = [
        StoredMessage(
            conversation_id="c1",
            seq=i,
            role=role,
            content=text,  # type: ignore[arg-type]
            created_at=T0 + timedelta(minutes=i),
        )
        for i, (role, text) in enumerate(lines)
    ]
    return ExtractionWindow(conversation_id="c1", user_id="u1", messages=messages, new_from_seq=0)


def call(
    stub: LLMStub,
    window: ExtractionWindow,
    *,
    model: str = "openai/stub-model",
    timeout_s: float = 5.0,
):
    return call_extraction_llm(
        window,
        model=model,
        api_base=stub.base_url,
        api_key="x",
        timeout_s=timeout_s,
        max_memories=10,
    )


def test_happy_path_returns_the_extraction_and_the_reported_usage(stub, window) -> None:
    stub.script([ok([PREFERENCE], EPISODE, usage=(321, 45))])

    result = call(stub, window)

    assert result.extraction.memories == [ExtractedMemory(**PREFERENCE)]  # type: ignore[arg-type]
    assert result.extraction.episode == ExtractedEpisode(**EPISODE)  # type: ignore[arg-type]
    assert (result.tokens_in, result.tokens_out) == (321, 45)
    assert result.cost_usd is None  # the stub's model has no price
    assert result.latency_ms > 0
    assert json.loads(result.raw) == {"memories": [PREFERENCE], "episode": EPISODE}


def test_a_known_model_gets_its_cost_from_the_local_price_map(stub, window) -> None:
    stub.script([ok([PREFERENCE], EPISODE, usage=(1000, 100))])

    result = call(stub, window, model="openai/gpt-4o-mini")

    # gpt-4o-mini: $0.15 per 1M input tokens, $0.60 per 1M output tokens
    assert result.cost_usd == pytest.approx(1000 * 0.15e-6 + 100 * 0.60e-6)


def test_the_request_carries_the_prompt_the_transcript_and_strict_json_settings(
    stub, window
) -> None:
    stub.answer([PREFERENCE], EPISODE)

    call(stub, window)

    (sent,) = stub.requests
    assert sent["messages"] == build_extraction_messages(
        window, max_memories=10, categories=CATEGORIES
    )
    assert sent["messages"][0]["role"] == "system"
    user = sent["messages"][1]["content"]
    fenced = user[user.index("<transcript>") : user.index("</transcript>")]
    for message in window.messages:
        assert message.content in fenced
    assert sent["response_format"] == {"type": "json_object"}
    assert sent["temperature"] == 0


def test_a_server_error_is_transient_and_not_retried_behind_our_back(stub, window) -> None:
    stub.script([status(500), ok([PREFERENCE], EPISODE)])

    with pytest.raises(TransientProviderError) as caught:
        call(stub, window)

    assert caught.value.status_code == 500
    assert caught.value.retry_after is None
    assert len(stub.requests) == 1


@pytest.mark.parametrize("code", [429, 503])
def test_retry_after_is_read_from_the_response(stub, window, code: int) -> None:
    stub.script([status(code, retry_after=7)])

    with pytest.raises(TransientProviderError) as caught:
        call(stub, window)

    assert caught.value.status_code == code
    assert caught.value.retry_after == 7.0
    assert len(stub.requests) == 1


def test_a_timeout_is_transient(stub, window) -> None:
    stub.script([timeout(5.0)])

    started = time.monotonic()
    with pytest.raises(TransientProviderError, match="did not answer in time"):
        call(stub, window, timeout_s=0.5)

    assert time.monotonic() - started < 3.0  # one attempt, no silent retries
    assert len(stub.requests) == 1


def test_an_openai_compatible_endpoint_is_called_through_one_client_per_process(
    stub, window
) -> None:
    stub.script([ok([PREFERENCE], EPISODE), ok([PREFERENCE], EPISODE)])

    client = openai_client("openai/stub-model", stub.base_url, "x")
    call(stub, window)
    call(stub, window)

    assert client is not None and client.max_retries == 0  # retries are the task's
    assert openai_client("openai/stub-model", stub.base_url, "x") is client
    assert openai_client("openai/other-model", stub.base_url, "x") is client
    assert openai_client("openai/stub-model", stub.base_url, "y") is not client
    assert len(stub.requests) == 2


def test_other_providers_and_unset_endpoints_leave_the_client_to_litellm(litellm_module) -> None:
    base = "http://127.0.0.1:9/v1"
    assert openai_client("anthropic/claude-3-haiku-20240307", base, "x") is None
    assert openai_client("hosted_vllm/some-model", base, "x") is None
    assert openai_client("openai/gpt-4o-mini", None, "x") is None  # litellm's default endpoint
    assert openai_client("openai/stub-model", base, None) is None  # litellm's key lookup


def test_an_unreachable_server_is_transient(window, litellm_module) -> None:
    stub = LLMStub()
    stub.stop()  # the port is now closed

    # a connection error, not the "HTTP 500" litellm makes of it
    with pytest.raises(
        TransientProviderError, match=r"could not reach .*MEMLANE_LLM_API_BASE"
    ) as caught:
        call(stub, window)
    assert "HTTP 500" not in str(caught.value) and caught.value.status_code is None


def test_a_malformed_answer_is_an_extraction_error_carrying_the_raw_text(stub, window) -> None:
    stub.script([malformed("Sure! Here are the memories: none")])

    with pytest.raises(ExtractionError) as caught:
        call(stub, window)

    assert caught.value.raw == "Sure! Here are the memories: none"


@pytest.mark.parametrize("code", [400, 401, 403, 404])
def test_refusals_are_permanent(stub, window, code: int) -> None:
    stub.script([status(code)])

    with pytest.raises(PermanentProviderError) as caught:
        call(stub, window)

    assert caught.value.status_code == code
    assert "MEMLANE_LLM_API_KEY" in str(caught.value)
    assert len(stub.requests) == 1


# --------------------------------------------------------------------------- embeddings


def embedder(stub: LLMStub, *, dim: int = 64, batch_size: int = 64) -> LiteLLMEmbedder:
    return LiteLLMEmbedder(
        "openai/stub-embed",
        api_base=stub.base_url,
        api_key="x",
        timeout_s=5.0,
        dim=dim,
        batch_size=batch_size,
    )


def test_a_batch_of_texts_is_one_request_and_keeps_its_order(stub) -> None:
    texts = [f"memory number {i}" for i in range(10)]

    vectors = embedder(stub).embed(texts)

    assert len(stub.embedding_requests) == 1
    assert stub.embedding_requests[0]["input"] == texts
    assert vectors == [pytest.approx(stub_vector(t, 64)) for t in texts]


def test_batches_are_cut_at_batch_size_and_blank_texts_are_not_sent(stub) -> None:
    texts = [f"fact {i}" for i in range(9)] + ["  "]

    vectors = embedder(stub, batch_size=4).embed(texts)

    assert [len(r["input"]) for r in stub.embedding_requests] == [4, 4, 1]
    assert vectors[9] == [0.0] * 64
    assert vectors[8] == pytest.approx(stub_vector("fact 8", 64))


def test_embedding_errors_are_classified_like_the_llms(stub) -> None:
    stub.script([status(500), status(401)])

    with pytest.raises(TransientProviderError):
        embedder(stub).embed(["a"])
    assert len(stub.embedding_requests) == 1  # the SDK's own retries are off
    with pytest.raises(PermanentProviderError):
        embedder(stub).embed(["a"])


def test_a_dimension_mismatch_names_the_setting_to_change(stub) -> None:
    with pytest.raises(ConfigurationError, match="MEMLANE_EMBEDDING_DIM=64"):
        embedder(stub, dim=384).embed(["a"])


# --------------------------------------------------------------------------- the stub itself


def _statuses(stub: LLMStub, n: int) -> list[int]:
    import httpx

    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    # the stub answers at once; a full 6-worker run on 2 cores once kept one answer
    # past 5 s, so the timeout only guards against a hang
    with httpx.Client(base_url=stub.base_url, timeout=60) as client:
        return [client.post("/chat/completions", json=body).status_code for _ in range(n)]


def test_drill_mode_fails_at_the_given_rate_reproducibly_by_seed() -> None:
    patterns = []
    for _ in range(2):
        with LLMStub() as stub:
            stub.fail_randomly([(0.3, status(500)), (0.2, status(429))], seed=11)
            patterns.append(_statuses(stub, 200))

    assert patterns[0] == patterns[1]
    assert 40 <= patterns[0].count(500) <= 80  # 60 expected
    assert 20 <= patterns[0].count(429) <= 60  # 40 expected
    assert set(patterns[0]) == {200, 429, 500}


def test_script_entries_come_before_the_drill_and_delay_slows_answers() -> None:
    with LLMStub(delay_s=0.2) as stub:
        stub.fail_randomly([(1.0, status(503))])
        stub.script([ok(), status(401)])
        started = time.monotonic()
        assert _statuses(stub, 3) == [200, 401, 503]
        assert time.monotonic() - started >= 0.2  # only the ok answer waits
