"""Errors of the model adapters (LLM and embeddings), split by what the caller should do.

- TransientLLMError: try again later (timeouts, lost connections, 429, 5xx). Tasks retry
  these with `compute_backoff`, honouring `retry_after` when the provider sent one.
- PermanentLLMError: retrying cannot help (bad key, bad request, unknown model). The job
  fails at once and says so.
- ExtractionError (memlane.pipeline.errors): the model answered but the answer is unusable; the
  task retries it a bounded number of times, then records the raw answer on the job.
"""

from __future__ import annotations

from memlane.pipeline.errors import MemlaneError


class TransientLLMError(MemlaneError):
    """The model provider could not answer now; the same call may succeed later."""

    code = "llm_unavailable"

    def __init__(
        self, message: str, *, retry_after: float | None = None, status_code: int | None = None
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after  # seconds the provider asked us to wait, if it said
        self.status_code = status_code


class PermanentLLMError(MemlaneError):
    """The model provider refused the call; fix the model, key or request, then re-run."""

    code = "llm_refused"

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
