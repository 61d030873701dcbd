"""What a chat app imports comes from `memlane` itself, and importing it stays cheap."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import memlane
from memlane.pipeline.errors import MemlaneError


@pytest.mark.parametrize("name", [n for n in memlane.__all__ if n != "Memlane"])
def test_every_public_error_is_importable_from_memlane(name: str) -> None:
    error = getattr(memlane, name)
    assert issubclass(error, MemlaneError)


def test_the_facade_is_importable_from_memlane() -> None:
    from memlane import Memlane
    from memlane.service.facade import Memlane as FacadeMemlane

    assert Memlane is FacadeMemlane


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="Memlan"):
        memlane.Memlan  # noqa: B018


def test_importing_memlane_or_an_error_loads_no_worker_or_store() -> None:
    code = (
        "import json, sys\n"
        "from memlane import BudgetError, TranscriptError\n"
        "print(json.dumps(sorted(n for n in sys.modules if n.startswith('memlane'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == ["memlane", "memlane.pipeline", "memlane.pipeline.errors"]


def test_every_model_provider_error_is_a_provider_error_and_the_old_names_stay() -> None:
    # The LLM and the embedding model fail alike: a caller catches one ProviderError.
    for name in ("TransientProviderError", "PermanentProviderError", "ExtractionError"):
        assert issubclass(getattr(memlane, name), memlane.ProviderError)
    assert memlane.TransientLLMError is memlane.TransientProviderError
    assert memlane.PermanentLLMError is memlane.PermanentProviderError
