"""Token counting with tiktoken, offline.

`tiktoken.get_encoding` downloads its BPE file on first use (or reads a cache directory
named by an environment variable). Neither is allowed here, so the encodings are built
directly from the BPE files memlane ships in `encodings/` beside this module: tiktoken's
own files under tiktoken's cache names (sha1 of the download URL). They are memlane's
own copy, not litellm's (which carries the same files), because the embedded install
has no litellm. Each file's sha256 is checked against the hash tiktoken pins, so a
corrupt or substituted file is refused instead of miscounting.

The regular expressions and special tokens are copied from `tiktoken_ext/openai_public.py`
(tiktoken 0.14); tests/unit/test_tokens.py checks the copy against that module.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import tiktoken

from memlane.pipeline.errors import ConfigurationError

_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"

_ENDOFTEXT = "<|endoftext|>"
_FIM_PREFIX = "<|fim_prefix|>"
_FIM_MIDDLE = "<|fim_middle|>"
_FIM_SUFFIX = "<|fim_suffix|>"
_ENDOFPROMPT = "<|endofprompt|>"

_P50K_PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
_CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_O200K_PAT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)


@dataclass(frozen=True, slots=True)
class EncodingSpec:
    name: str
    sha256: str
    pat_str: str
    special_tokens: dict[str, int]


ENCODING_SPECS: dict[str, EncodingSpec] = {
    "o200k_base": EncodingSpec(
        "o200k_base",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        _O200K_PAT,
        {_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018},
    ),
    "cl100k_base": EncodingSpec(
        "cl100k_base",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        _CL100K_PAT,
        {
            _ENDOFTEXT: 100257,
            _FIM_PREFIX: 100258,
            _FIM_MIDDLE: 100259,
            _FIM_SUFFIX: 100260,
            _ENDOFPROMPT: 100276,
        },
    ),
    "p50k_base": EncodingSpec(
        "p50k_base",
        "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
        _P50K_PAT,
        {_ENDOFTEXT: 50256},
    ),
}

DEFAULT_ENCODING = "cl100k_base"

# Model names (after any "provider/" prefix) that use o200k_base, as in tiktoken's table.
_O200K_PREFIXES = ("gpt-4o", "chatgpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "gpt-oss")
_O200K_REASONING = ("o1", "o3", "o4")


def encoding_name_for_model(model: str) -> str:
    """The tiktoken encoding of a litellm model string.

    o200k_base for the gpt-4o family, gpt-4.1, gpt-4.5, gpt-5, gpt-oss and the o1/o3/o4
    reasoning models; cl100k_base for anything else (including no model at all, "").
    A provider prefix is ignored ("azure/gpt-4o" is gpt-4o), and an encoding name is
    accepted as itself ("o200k_base").
    """
    name = model.strip().lower().rsplit("/", 1)[-1]
    if name in ENCODING_SPECS:
        return name
    if name.startswith(_O200K_PREFIXES):
        return "o200k_base"
    if any(name == family or name.startswith(family + "-") for family in _O200K_REASONING):
        return "o200k_base"
    return DEFAULT_ENCODING


def tokenizer_dir() -> Path:
    """The folder of tiktoken's BPE files that memlane ships (package data)."""
    return Path(__file__).resolve().parent / "encodings"


def parse_bpe_ranks(data: bytes) -> dict[bytes, int]:
    """Parse a .tiktoken file: one `base64(token) rank` pair per line."""
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


@cache
def get_encoding(name: str) -> tiktoken.Encoding:
    """Build (once per process) the named encoding from memlane's copy of its BPE file."""
    spec = ENCODING_SPECS.get(name)
    if spec is None:
        raise ConfigurationError(
            f"unknown token encoding {name!r}; known: {', '.join(sorted(ENCODING_SPECS))}"
        )
    cache_name = hashlib.sha1(_URL.format(name=name).encode()).hexdigest()
    path = tokenizer_dir() / cache_name
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ConfigurationError(
            f"cannot count tokens offline: the {name} encoding file is missing from "
            f"memlane's encodings folder ({path.name}: {error.strerror}); reinstall memlane"
        ) from error
    if hashlib.sha256(data).hexdigest() != spec.sha256:
        raise ConfigurationError(
            f"the {name} encoding file in memlane's encodings folder is not tiktoken's "
            "(sha256 mismatch); reinstall memlane"
        )
    return tiktoken.Encoding(
        name,
        pat_str=spec.pat_str,
        mergeable_ranks=parse_bpe_ranks(data),
        special_tokens=dict(spec.special_tokens),
    )


def encoding_for_model(model: str) -> tiktoken.Encoding:
    """The encoding of a litellm model string (see `encoding_name_for_model`), cached."""
    return get_encoding(encoding_name_for_model(model))


def count_tokens(text: str, encoding: tiktoken.Encoding) -> int:
    """Tokens of `text` as the model would see them in a prompt.

    Special-token strings such as "<|endoftext|>" in user content count as ordinary text
    (they are not special in a chat message, and must not raise).
    """
    return len(encoding.encode_ordinary(text))
