"""memlane: long-term memory for LLM chat apps."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memlane.facade import Memlane

__all__ = ["Memlane"]


def __getattr__(name: str) -> Any:
    # Lazy, so `memlane --help` and the assembler start without importing the workers.
    if name == "Memlane":
        from memlane.facade import Memlane

        return Memlane
    raise AttributeError(name)
