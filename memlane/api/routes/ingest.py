"""Ingest: `POST /v1/transcripts`, a chat app's transcript stored and its extractions queued."""

from __future__ import annotations

from fastapi import Request

from memlane.api.deps import TRANSCRIPTS_PATH, Key, Lane, metrics_of, needs, reach, v1_router
from memlane.models.schemas import EnqueueResult, TranscriptIn

router = v1_router()


@router.post(
    TRANSCRIPTS_PATH.removeprefix("/v1"),
    status_code=202,
    tags=["ingest"],
    dependencies=[needs("write")],
)
def post_transcript(
    transcript: TranscriptIn, lane: Lane, request: Request, key: Key
) -> EnqueueResult:
    """Store the messages and queue the extraction jobs now due; never waits for them."""
    reach(key, transcript.user_id)
    result = lane.enqueue(transcript)
    enqueued = metrics_of(request).enqueued
    enqueued.labels("transcripts").inc()
    enqueued.labels("messages").inc(result.stored_messages)
    enqueued.labels("jobs").inc(len(result.job_ids))
    return result
