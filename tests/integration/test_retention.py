"""Retention: the sweep (beat's, `memlane sweep`, POST /v1/jobs/sweep) purges the text of
messages older than MEMLANE_MESSAGE_RETENTION_DAYS — but not of messages a job not yet
done reads, nor of messages never extracted — and deletes context packs older than
MEMLANE_PACK_RETENTION_DAYS. A purged message keeps its position, so sending the same
transcript again stores and extracts nothing. Both backends."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select, update

from memlane.api.app import create_app
from memlane.config.settings import Settings, load_settings
from memlane.models.db import unit_of_work
from memlane.models.schemas import TranscriptIn
from memlane.models.store.conversations import jobs
from memlane.models.store.conversations import messages as conversations
from memlane.models.tables import ContextPackRow, Job, Message
from memlane.pipeline.extraction.cadence import WindowSpec
from memlane.service.facade import Memlane
from memlane.workers import sweeper
from tests.integration.test_cli import cli
from tests.integration.test_erase_user import hits
from tests.integration.test_purge_gone import a_failed_store_job

NOW = datetime.now(UTC)
OLD = NOW - timedelta(days=10)


@pytest.fixture
def settings(db_url: str) -> Settings:
    return load_settings(database_url=db_url, message_retention_days=7, pack_retention_days=3)


@pytest.fixture
def lane(settings: Settings) -> Iterator[Memlane]:
    with Memlane(settings) as lane:
        yield lane


def transcript(conversation: str, text: str, *, at: datetime, final: bool = True) -> dict:  # type: ignore[type-arg]
    said = at.isoformat()
    return {
        "conversation_id": conversation,
        "user_id": "u1",
        "messages": [
            {"role": "user", "content": text, "created_at": said},
            {"role": "assistant", "content": "Noted.", "created_at": said},
        ],
        "final": final,
    }


def texts(db_url: str, conversation: str) -> list[str]:
    with unit_of_work(db_url) as session:
        return list(
            session.scalars(
                select(Message.content)
                .where(Message.conversation_id == conversation)
                .order_by(Message.seq)
            )
        )


def test_the_sweep_purges_old_texts_but_what_a_job_still_needs(
    lane: Memlane, settings: Settings, db_url: str
) -> None:
    lane.enqueue(transcript("c1", "I live in Zanzibarville.", at=OLD))
    lane.flush()  # extracted: its job is done
    lane.enqueue(transcript("c3", "I work as a lighthouse keeper.", at=NOW + timedelta(days=6)))
    lane.enqueue(transcript("c4", "I prefer green tea.", at=OLD, final=False))  # never read
    lane.flush()
    with unit_of_work(db_url) as session:  # an old conversation whose job is still queued
        conversations.save_transcript(
            session, TranscriptIn.model_validate(transcript("c2", "I own a kayak.", at=OLD)),
            now=NOW,
        )  # fmt: skip
        jobs.create_jobs(
            session, conversation_id="c2", user_id="u1", windows=[WindowSpec(0, 1, 0)], now=NOW
        )
    [memory] = [m for m in lane.list_memories("u1") if "Zanzibarville" in m.content]

    later = NOW + timedelta(days=8)  # c1's job finished 8 days before: its extraction goes
    result = sweeper.sweep(settings, now=later)
    assert result.messages_purged == 2
    assert texts(db_url, "c1") == ["", ""]
    assert texts(db_url, "c2") == ["I own a kayak.", "Noted."]  # its job is not done
    assert texts(db_url, "c3") == ["I work as a lighthouse keeper.", "Noted."]  # 2 days old
    assert texts(db_url, "c4") == ["I prefer green tea.", "Noted."]  # never extracted
    assert set(hits(db_url, "Zanzibarville")) == {"memories", "episodes"}  # what was learned
    with unit_of_work(db_url) as session:
        purged = session.scalars(select(Message).where(Message.conversation_id == "c1")).all()
        assert all(m.purged_at is not None and m.content_sha256 == "" for m in purged)
    assert sweeper.sweep(settings, now=later).messages_purged == 0  # nothing twice

    # the same transcript again: nothing stored, nothing extracted, nothing learned twice
    again = lane.enqueue(transcript("c1", "I live in Zanzibarville.", at=OLD))
    lane.flush()
    assert (again.stored_messages, again.job_ids) == (0, [])
    assert lane.get_memory("u1", memory.id).access_count == 1
    # and a longer one stores only what is new
    longer = transcript("c1", "I live in Zanzibarville.", at=OLD)
    longer["messages"] += [{"role": "user", "content": "I have a cat named Ada."}]
    assert lane.enqueue(longer).stored_messages == 1
    lane.flush()  # its tail is extracted

    with unit_of_work(db_url) as session:  # once c2's job is done, its texts go too
        session.execute(update(Job).where(Job.conversation_id == "c2").values(status="done"))
    assert sweeper.sweep(settings, now=later).messages_purged == 3  # c2's, c1's new one
    assert texts(db_url, "c2") == ["", ""]


def test_the_sweep_deletes_old_packs_and_keeps_without_settings(lane: Memlane, db_url: str) -> None:
    keep_all = load_settings(database_url=db_url)  # unset: kept for ever
    with Memlane(keep_all) as plain:
        plain.add_memory("u1", {"content": "Drinks oolong after lunch."})
        plain.assemble("u1", "oolong", now=OLD)  # a pack assembled 10 days ago
        plain.assemble("u1", "what does the user drink?", now=NOW)
        plain.flush()
    assert sweeper.sweep(keep_all, now=NOW).packs_deleted == 0
    with TestClient(create_app(lane)) as client:
        swept = client.post("/v1/jobs/sweep").json()
    assert swept["packs_deleted"] == 1 and swept["messages_purged"] == 0
    with unit_of_work(db_url) as session:
        [kept] = session.scalars(select(ContextPackRow.assembled_at)).all()
        assert kept > NOW - timedelta(days=1)


def test_memlane_sweep_applies_retention(db_url: str) -> None:
    env = {"MEMLANE_MESSAGE_RETENTION_DAYS": "7"}
    with Memlane(load_settings(database_url=db_url)) as lane:
        lane.enqueue(transcript("c1", "I live in Zanzibarville.", at=OLD))
        lane.flush()
    swept = cli(db_url, "sweep", **env)
    assert swept.exit_code == 0, swept.output
    assert "2 message text(s) purged" in swept.stderr
    with unit_of_work(db_url) as session:
        left = select(func.count()).select_from(Message).where(Message.content != "")
        assert session.scalar(left) == 0


def test_a_jobs_kept_extraction_goes_with_its_messages_text_however_recently_it_finished(
    db_url: str,
) -> None:
    """Retention is timed by when the messages were said, not by when their job ran: a
    transcript of 2020 extracted today loses its texts at the next sweep (one day kept),
    and so does what the LLM read off them, kept by a job whose store stage failed or by
    a job done before 0011 (which kept it). Retried, the failed job extracts again from
    what its messages still say."""
    settings = load_settings(database_url=db_url, message_retention_days=1)
    long_ago = datetime(2020, 3, 1, tzinfo=UTC)
    failed_old = a_failed_store_job(db_url, "u1", conversation="c-old", said_at=long_ago)
    failed_new = a_failed_store_job(db_url, "u1", conversation="c-new")  # said today
    with Memlane(load_settings(database_url=db_url)) as lane:  # its worker sweeps nothing
        lane.enqueue(transcript("c-done", "I live in Zanzibarville.", at=long_ago))
        lane.flush()
    with unit_of_work(db_url) as session:  # a job done before 0011 kept its extraction
        [done] = session.scalars(select(Job.id).where(Job.conversation_id == "c-done")).all()
        kept = {"memories": [{"content": "User lives in Zanzibarville."}], "episode": {}}
        session.execute(update(Job).where(Job.id == done).values(extraction=kept))

    result = sweeper.sweep(settings, now=NOW)

    assert result.messages_purged == 4  # c-old's and c-done's, said in 2020
    with unit_of_work(db_url) as session:
        extractions = {i: e for i, e in session.execute(select(Job.id, Job.extraction))}
        finished = session.scalar(select(Job.finished_at).where(Job.id == done))
    assert finished is not None and finished > NOW - timedelta(days=1)  # it ran today
    assert extractions[done] is None and extractions[failed_old] is None
    assert extractions[failed_new] is not None  # its messages keep their text
    assert texts(db_url, "c-new") != ["", ""]
    with Memlane(load_settings(database_url=db_url)) as lane:  # a retry extracts again
        assert lane.retry_job(failed_old).stage == "extract"
        lane.flush()
        retried = lane.job(failed_old)
        learned = lane.list_memories("u1")
    assert retried.status == "done"  # from what the messages still say: nothing
    assert not any("axolotl" in m.content for m in learned)
