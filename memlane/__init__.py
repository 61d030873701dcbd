"""memlane: long-term memory for LLM chat apps.

`from memlane import Memlane` is the Python front door; the errors it raises are importable
from here too (`from memlane import BudgetError, TranscriptError`), so a chat app never
reaches into memlane's layout to catch them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memlane.pipeline.errors import (
        BudgetError,
        ConfigurationError,
        ConflictError,
        ExtractionError,
        InvalidInputError,
        MemlaneError,
        NotFoundError,
        ProviderError,
        TranscriptError,
    )
    from memlane.service.facade import Memlane
    from memlane.workers.errors import (
        PermanentLLMError,
        PermanentProviderError,
        TransientLLMError,
        TransientProviderError,
    )

# Resolved on first use, so importing any part of memlane (the pure pipeline included)
# loads nothing else, and `memlane --help` starts without the workers.
_PUBLIC = {
    "Memlane": "memlane.service.facade",
    "MemlaneError": "memlane.pipeline.errors",
    "BudgetError": "memlane.pipeline.errors",
    "ConfigurationError": "memlane.pipeline.errors",
    "ConflictError": "memlane.pipeline.errors",
    "InvalidInputError": "memlane.pipeline.errors",
    "ExtractionError": "memlane.pipeline.errors",
    "NotFoundError": "memlane.pipeline.errors",
    "TranscriptError": "memlane.pipeline.errors",
    "ProviderError": "memlane.pipeline.errors",
    "PermanentProviderError": "memlane.workers.errors",
    "TransientProviderError": "memlane.workers.errors",
    "PermanentLLMError": "memlane.workers.errors",
    "TransientLLMError": "memlane.workers.errors",
}

__all__ = [
    "BudgetError",
    "ConfigurationError",
    "ConflictError",
    "ExtractionError",
    "InvalidInputError",
    "Memlane",
    "MemlaneError",
    "NotFoundError",
    "PermanentLLMError",
    "PermanentProviderError",
    "ProviderError",
    "TranscriptError",
    "TransientLLMError",
    "TransientProviderError",
]


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'memlane' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
