"""Offline tiktoken: encodings built from the BPE files memlane ships, no network."""

from __future__ import annotations

import importlib.util
import socket
from pathlib import Path

import pytest
import tiktoken
import tiktoken_ext.openai_public as openai_public  # type: ignore[import-untyped]

from memlane.pipeline.assembly import tokens
from memlane.pipeline.assembly.tokens import (
    ENCODING_SPECS,
    count_tokens,
    encoding_for_model,
    encoding_name_for_model,
    get_encoding,
)
from memlane.pipeline.errors import ConfigurationError

SAMPLES = [
    "hello world",
    "Migrating auth to PostgreSQL",
    '<memory id="mem_1" tier="verified">Prefers TypeScript &amp; Vim</memory>\n',
    "numbers 1234567 and 3.14159, emoji 🎉, accents: café, naïve; 日本語のテキスト",
    "  leading spaces\n\n\ttabs and\r\nCRLF  ",
    "It's what we'd've done, they'll say",
]


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("tried to open a network connection")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_known_token_ids_in_cl100k_and_o200k(no_network: None) -> None:
    # ids published in tiktoken's README / widely reproduced; built here with no network
    cl100k = get_encoding.__wrapped__("cl100k_base")
    o200k = get_encoding.__wrapped__("o200k_base")
    assert cl100k.encode_ordinary("hello world") == [15339, 1917]
    assert cl100k.encode_ordinary("tiktoken is great!") == [83, 1609, 5963, 374, 2294, 0]
    assert o200k.encode_ordinary("hello world") == [24912, 2375]
    assert count_tokens("hello world", cl100k) == 2
    assert count_tokens("", cl100k) == 0


@pytest.mark.parametrize("name", sorted(ENCODING_SPECS))
def test_matches_tiktoken_own_encoding(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # tiktoken itself, pointed at the same files through its cache variable
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tokens.tokenizer_dir()))
    reference = tiktoken.get_encoding(name)
    ours = get_encoding(name)
    for sample in SAMPLES:
        assert ours.encode_ordinary(sample) == reference.encode_ordinary(sample), sample
    assert ours.n_vocab == reference.n_vocab


@pytest.mark.parametrize("name", sorted(ENCODING_SPECS))
def test_copied_constants_match_tiktoken_ext(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, str | None] = {}

    def fake_load(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        seen["url"], seen["hash"] = url, expected_hash
        return {}

    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", fake_load)
    constructor = openai_public.ENCODING_CONSTRUCTORS[name]
    official = constructor()
    spec = ENCODING_SPECS[name]
    assert official["pat_str"] == spec.pat_str
    assert official["special_tokens"] == spec.special_tokens
    assert seen["hash"] == spec.sha256
    assert seen["url"] == tokens._URL.format(name=name)


def test_special_token_text_counts_as_plain_text() -> None:
    encoding = get_encoding("cl100k_base")
    # "<|endoftext|>" typed by a user is 7 ordinary tokens, not one special token
    assert count_tokens("<|endoftext|>", encoding) == 7


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini", "o200k_base"),
        ("openai/gpt-4o-mini", "o200k_base"),
        ("azure/gpt-4.1-nano", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("o1", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("chatgpt-4o-latest", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("anthropic/claude-3-5-haiku", "cl100k_base"),
        ("ollama/llama3", "cl100k_base"),
        ("o1x-model", "cl100k_base"),
        ("", "cl100k_base"),
        ("p50k_base", "p50k_base"),
        ("O200K_BASE", "o200k_base"),
    ],
)
def test_encoding_name_for_model(model: str, expected: str) -> None:
    assert encoding_name_for_model(model) == expected


def test_encoding_for_model_is_built_once() -> None:
    assert encoding_for_model("gpt-4o") is encoding_for_model("openai/gpt-4o-mini")
    assert encoding_for_model("gpt-4o").name == "o200k_base"


def test_unknown_encoding_name_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="unknown token encoding 'r50k_base'"):
        get_encoding.__wrapped__("r50k_base")


def test_the_encodings_are_memlane_own_not_litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    # the embedded install has no litellm: nothing may look for it to count tokens
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert get_encoding.__wrapped__("cl100k_base").encode_ordinary("hello world") == [15339, 1917]


def test_missing_file_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(tokens, "tokenizer_dir", lambda: tmp_path)
    with pytest.raises(ConfigurationError, match="cl100k_base encoding file is missing"):
        get_encoding.__wrapped__("cl100k_base")


def test_corrupt_file_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "9b5ad71b2ce5302211f9c61530b329a4922fc6a4").write_bytes(b"IQ== 0\n")
    monkeypatch.setattr(tokens, "tokenizer_dir", lambda: tmp_path)
    with pytest.raises(ConfigurationError, match="sha256 mismatch"):
        get_encoding.__wrapped__("cl100k_base")


def test_parse_bpe_ranks() -> None:
    assert tokens.parse_bpe_ranks(b"IQ== 0\naGVsbG8= 7\n\n") == {b"!": 0, b"hello": 7}
