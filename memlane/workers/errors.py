"""Errors of the model providers (LLM and embeddings), split by what the caller should do.
All are ProviderErrors (memlane.pipeline.errors); the names TransientLLMError and
PermanentLLMError, from when only the LLM raised them, stay importable.

- TransientProviderError: try again later (timeouts, lost connections, 429, 5xx). Tasks retry
  these with `compute_backoff`, honouring `retry_after` when the provider sent one.
- PermanentProviderError: retrying cannot help (bad key, bad request, unknown model). The job
  fails at once and says so.
- ExtractionError (memlane.pipeline.errors): the model answered but the answer is unusable; the
  task retries it a bounded number of times, then records the raw answer on the job.
"""

from __future__ import annotations

from memlane.pipeline.errors import ProviderError


class TransientProviderError(ProviderError):
    """The model provider could not answer now; the same call may succeed later."""

    # The codes predate embeddings' use of these errors; jobs and clients store them.
    code = "llm_unavailable"

    def __init__(
        self, message: str, *, retry_after: float | None = None, status_code: int | None = None
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after  # seconds the provider asked us to wait, if it said
        self.status_code = status_code


class PermanentProviderError(ProviderError):
    """The model provider refused the call; fix the model, key or request, then re-run."""

    code = "llm_refused"

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


# The names of before embeddings shared these errors (public: `from memlane import ...`).
TransientLLMError = TransientProviderError
PermanentLLMError = PermanentProviderError
