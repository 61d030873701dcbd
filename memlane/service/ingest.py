"""The facade's ingest (Memlane inherits it): a chat app's transcripts validated whole,
their messages stored with the extraction jobs now due in one transaction, then the jobs'
ids published to the fleet."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from sqlalchemy.orm import Session

from memlane.models.db import unit_of_work
from memlane.models.schemas import EnqueueResult, TranscriptIn
from memlane.models.store.conversations import jobs
from memlane.models.store.conversations import messages as conversations
from memlane.pipeline.errors import TranscriptError, problems_of
from memlane.pipeline.extraction.cadence import due_windows, why_no_window

if TYPE_CHECKING:
    from memlane.config.settings import Settings


def utcnow() -> datetime:
    return datetime.now(UTC)


def parse_transcript(data: TranscriptIn | Mapping[str, Any] | str | bytes) -> TranscriptIn:
    """Validate a transcript; TranscriptError names the message and field at fault."""
    if isinstance(data, TranscriptIn):
        return data
    try:
        if isinstance(data, str | bytes):
            return TranscriptIn.model_validate_json(data)
        return TranscriptIn.model_validate(data)
    except ValidationError as exc:
        raise TranscriptError("invalid transcript: " + problems_of(exc)) from None


def _in_batch(index: int, size: int, exc: TranscriptError) -> str:
    """The error of a batch's transcript, saying which one when there are several."""
    if size == 1:
        return str(exc)
    return f"transcript {index} of the batch: {exc}; nothing of the batch was written"


class TranscriptIngest:
    """Enqueueing transcripts; mixed into Memlane."""

    if TYPE_CHECKING:
        settings: Settings
        url: str

        def _publish(self, stage: str, job_ids: Sequence[str]) -> None: ...

    def enqueue(self, transcript: TranscriptIn | Mapping[str, Any] | str | bytes) -> EnqueueResult:
        """Store the transcript's messages and the extraction jobs now due, in one
        transaction, then publish the jobs' ids. A malformed transcript raises
        TranscriptError and writes nothing."""
        return self.enqueue_many([transcript])[0]

    def enqueue_many(
        self,
        transcripts: Sequence[TranscriptIn | Mapping[str, Any] | str | bytes],
        *,
        on_stored: Callable[[int], None] | None = None,
    ) -> list[EnqueueResult]:
        """`enqueue` for several transcripts, all or nothing: every one is validated, then
        all are stored in one transaction (one that contradicts what is stored, e.g. a
        message id stored before with other text, raises TranscriptError naming its place
        in the batch, and nothing of any is written), then every job is published.
        `on_stored` hears how many are stored so far (a CLI's progress bar)."""
        parsed = []
        for index, transcript in enumerate(transcripts):
            try:
                parsed.append(parse_transcript(transcript))
            except TranscriptError as exc:
                raise TranscriptError(_in_batch(index, len(transcripts), exc)) from None
        now = utcnow()
        results: list[EnqueueResult] = []
        with unit_of_work(self.url) as session:
            for index, transcript in enumerate(parsed):
                try:
                    results.append(self._store_transcript(session, transcript, now))
                except TranscriptError as exc:
                    raise TranscriptError(_in_batch(index, len(parsed), exc)) from None
                if on_stored is not None:
                    on_stored(index + 1)
        # Published after the commit: a worker never sees an id before its row exists.
        # If publishing fails the rows stay queued and the sweep publishes them later.
        self._publish("extract", [job_id for result in results for job_id in result.job_ids])
        return results

    def _store_transcript(
        self, session: Session, parsed: TranscriptIn, now: datetime
    ) -> EnqueueResult:
        s = self.settings
        saved = conversations.save_transcript(session, parsed, now=now)
        assistant_seqs = saved.assistant_seqs
        windows = due_windows(
            assistant_seqs=assistant_seqs,
            message_count=saved.message_count,
            extracted_to_seq=saved.extracted_to_seq,
            every=s.extract_every,
            window=s.extract_window,
            final=saved.final,
        )
        job_ids = jobs.create_jobs(
            session,
            conversation_id=saved.conversation_id,
            user_id=saved.user_id,
            windows=windows,
            now=now,
        )
        return EnqueueResult(
            conversation_id=saved.conversation_id,
            stored_messages=saved.stored,
            skipped_messages=saved.skipped,
            job_ids=job_ids,
            ignored_fields=parsed.ignored_fields,
            no_job_reason=None
            if job_ids
            else why_no_window(
                assistant_count=len(assistant_seqs), every=s.extract_every, final=saved.final
            )
            if not windows
            else "its extractions were queued already",
        )
