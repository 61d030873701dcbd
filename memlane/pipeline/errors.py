"""memlane's error tree. Every error a user can see derives from MemlaneError and says
what to do about it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


def problems_of(exc: ValidationError, *, at_most: int = 5) -> str:
    """A ValidationError in memlane's one error shape, `field.path: reason; …` (a
    whole-object error is its reason alone, as its words name the fields): never
    pydantic's dump, with its model names, input values and documentation links."""
    problems = []
    for error in exc.errors()[:at_most]:
        where = ".".join(str(part) for part in error["loc"])
        reason = str(error["msg"]).removeprefix("Value error, ")
        problems.append(f"{where}: {reason}" if where else reason)
    extra = exc.error_count() - at_most
    return "; ".join(problems) + (f" (and {extra} more)" if extra > 0 else "")


class MemlaneError(Exception):
    """Base of every error memlane raises on purpose."""

    code = "memlane_error"


class ConfigurationError(MemlaneError):
    """A setting is missing or invalid; the message names the variable."""

    code = "configuration_error"


class TranscriptError(MemlaneError):
    """A transcript was rejected whole; nothing of it was written."""

    code = "invalid_transcript"


class ProviderError(MemlaneError):
    """A model provider (the LLM or the embedding model) failed or answered unusably.

    Subclasses say what to do: memlane.workers.errors' TransientProviderError (retry later)
    and PermanentProviderError (fix the model, key or request), and ExtractionError.
    """

    code = "provider_error"


class ExtractionError(ProviderError):
    """The extractor's answer could not be turned into memories.

    Carries the raw answer so an operator can see what the model said.
    """

    code = "extraction_failed"

    def __init__(self, message: str, *, raw: str = "") -> None:
        super().__init__(message)
        self.raw = raw


class BudgetError(MemlaneError):
    """The items that must always be in the context do not fit its budget."""

    code = "budget_exceeded"

    def __init__(self, message: str, *, budget: int, required: int) -> None:
        super().__init__(message)
        self.budget = budget
        self.required = required

    @property
    def over_by(self) -> int:
        return self.required - self.budget


class InvalidInputError(MemlaneError, ValueError):
    """A value given to memlane (a user id, a text, a number) that it cannot use; the
    message names the value and why. Nothing was written."""

    code = "invalid_input"


class ConflictError(MemlaneError):
    """The request contradicts what is stored (a procedure name already taken)."""

    code = "conflict"


class BrokerUnavailableError(MemlaneError):
    """The broker did not take job ids; the jobs are stored and stay queued until a sweep
    publishes them (beat's, or `memlane jobs sweep`)."""

    code = "broker_unavailable"

    def __init__(self, message: str, *, job_ids: list[str]) -> None:
        super().__init__(message)
        self.job_ids = job_ids


class NotFoundError(MemlaneError):
    """A memory, job or pack id that does not exist (for this user)."""

    code = "not_found"
