"""The embedded default's in-process worker runs the same stages as the fleet."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memlane.config.settings import load_settings
from memlane.service.facade import Memlane


def dated_transcript(start: datetime) -> dict:
    messages = []
    for i in range(5):
        user = "I prefer TypeScript over JavaScript." if i == 1 else f"Tell me about step {i}."
        messages.append(
            {
                "role": "user",
                "content": user,
                "created_at": (start + timedelta(minutes=2 * i)).isoformat(),
            }
        )
        messages.append(
            {
                "role": "assistant",
                "content": f"Step {i} explained.",
                "created_at": (start + timedelta(minutes=2 * i + 1)).isoformat(),
            }
        )
    return {"conversation_id": "c1", "user_id": "u1", "messages": messages}


def test_memories_are_dated_by_the_message_that_stated_them(db_url: str) -> None:
    said = datetime(2026, 1, 12, 9, 0, tzinfo=UTC)
    with Memlane(load_settings(database_url=db_url)) as lane:
        result = lane.enqueue(dated_transcript(said))
        assert lane.wait(result.job_ids, timeout=30) == {result.job_ids[0]: "done"}
        [memory] = [m for m in lane.list_memories("u1") if "TypeScript" in m.content]
        job = lane.job(result.job_ids[0])
    assert memory.created_at == said + timedelta(minutes=2)  # message seq 2
    assert memory.source_job_id == job.id and job.model == "offline"
