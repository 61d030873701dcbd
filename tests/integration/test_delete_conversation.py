"""Deleting a conversation ("delete this chat"): its messages, jobs and episodes go, and
so do the memories learned only from it, leaving a purge's fingerprint (a later
conversation or a merged import does not bring them back); a memory another
conversation (or the user) also stated stays without this one's evidence, and one it
superseded comes back. Both backends; facade, API and CLI."""

from __future__ import annotations

from datetime import datetime

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from memlane.api.app import create_app
from memlane.models.db import unit_of_work
from memlane.models.tables import EpisodeRow
from memlane.pipeline.dedup.redaction import MARKER
from memlane.pipeline.errors import NotFoundError
from memlane.pipeline.records import MemoryStatus
from memlane.service.facade import Memlane
from tests.integration.test_cli import cli
from tests.integration.test_erase_user import hits
from tests.integration.test_purge_gone import grep


def say(lane: Memlane, conversation: str, *texts: str, user: str = "u1") -> None:
    messages = []
    for text in texts:
        messages += [{"role": "user", "content": text}, {"role": "assistant", "content": "Ok."}]
    lane.enqueue(
        {"conversation_id": conversation, "user_id": user, "messages": messages, "final": True}
    )
    lane.flush()


def contents(lane: Memlane, status: MemoryStatus | None = "active") -> list[str]:
    return sorted(m.content for m in lane.list_memories("u1", status=status))


def test_what_only_the_conversation_taught_goes_the_rest_stays(
    lane: Memlane, db_url: str, now: datetime
) -> None:
    say(lane, "c0", "I live in Zanzibarville.", user="u2")  # another user's same words
    theirs = hits(db_url, "Zanzibarville")
    say(lane, "c1", "I prefer green tea over coffee.", "I live in Zanzibarville.")
    say(lane, "c2", "I prefer green tea over coffee.")  # confirms the tea, elsewhere
    say(lane, "c3", "I work as a lighthouse keeper.")
    hand = lane.add_memory("u1", {"content": "User prefers black coffee at night."})
    say(lane, "c1b", "I prefer black coffee at night.")  # confirms a hand-made one
    tea = next(m for m in lane.list_memories("u1") if "tea" in m.content)
    assert tea.access_count == 2 and tea.source_conversation_id == "c1"
    assert lane.get_memory("u1", hand.id).access_count == 2
    lane.warm("u1")
    assert "Zanzibarville" in lane.assemble("u1", "where does the user live?", now=now).text

    deleted = lane.delete_conversation("u1", "c1")
    assert deleted == {
        "messages": 4, "jobs": 1, "episodes": 1, "memories_deleted": 1, "memories_kept": 1,
        "memories_restored": 0, "episodes_redacted": 0, "context_packs": 1,
    }  # fmt: skip
    assert contents(lane) == [
        "User prefers black coffee at night.",
        "User prefers green tea over coffee.",
        "User works as a lighthouse keeper.",
    ]
    kept = lane.get_memory("u1", tea.id)  # without c1's evidence
    assert kept.access_count == 1 and kept.source_conversation_id is None
    assert [e.kind for e in lane.memory_history("u1", tea.id)] == [
        "confirmed",
        "evidence_removed",
    ]
    # the warm view followed, and nothing of c1's own words is left anywhere
    assert "Zanzibarville" not in lane.assemble("u1", "where does the user live?", now=now).text
    lane.flush()
    assert hits(db_url, "Zanzibarville") == theirs  # the pack that showed it went too
    with pytest.raises(NotFoundError):
        lane.delete_conversation("u1", "c1")  # gone
    with pytest.raises(NotFoundError):
        lane.delete_conversation("u1", "c0")  # not theirs
    # the other user's copy of the same words is untouched
    assert [m.content for m in lane.list_memories("u2")] == ["User lives in Zanzibarville."]

    lane.delete_conversation("u1", "c1b")  # a hand-made memory stays, its c1b evidence goes
    assert lane.get_memory("u1", hand.id).access_count == 1
    # the same id again is a new conversation; the deleted fact left a purge's
    # fingerprint, so it is not learned again until the fingerprints are lifted
    say(lane, "c1", "I live in Zanzibarville.")
    assert "User lives in Zanzibarville." not in contents(lane)
    assert lane.lift_fingerprints("u1") == 1
    say(lane, "c1c", "I live in Zanzibarville.")
    assert "User lives in Zanzibarville." in contents(lane)


def test_a_memory_superseded_by_a_deleted_one_is_active_again(lane: Memlane) -> None:
    say(lane, "c1", "I prefer green tea over coffee.")
    say(lane, "c2", "I no longer prefer green tea over coffee.")
    assert contents(lane) == ["User no longer prefers green tea over coffee."]
    [old] = lane.list_memories("u1", status="superseded")
    counts = lane.delete_conversation("u1", "c2")
    assert (counts["memories_deleted"], counts["memories_restored"]) == (1, 1)
    assert contents(lane) == ["User prefers green tea over coffee."]
    restored = lane.memory_history("u1", old.id)[-1]
    assert restored.kind == "restored" and "superseded_by" in restored.detail
    [purged] = [e for e in lane.memory_history("u1", restored.detail["superseded_by"])]
    assert purged.kind == "purged" and purged.detail == {"with_conversation": "c2"}


def test_the_api_and_the_cli_delete_a_conversation(lane: Memlane, db_url: str) -> None:
    say(lane, "c1", "I live in Zanzibarville.")
    say(lane, "c2", "I work as a lighthouse keeper.")
    with TestClient(create_app(lane)) as client:
        answer = client.delete("/v1/users/u1/conversations/c1")
        assert answer.status_code == 200
        assert answer.json()["deleted"]["memories_deleted"] == 1
        assert client.delete("/v1/users/u1/conversations/c1").status_code == 404
    refused = cli(db_url, "users", "delete-conversation", "--user", "u1", "c2")
    assert refused.exit_code == 2 and "--yes" in refused.output
    done = cli(db_url, "users", "delete-conversation", "--user", "u1", "c2", "--yes")
    assert done.exit_code == 0 and "1 memories deleted" in done.stderr
    assert contents(lane, None) == []


def test_a_deleted_conversations_facts_stay_out_of_a_merged_import(
    lane: Memlane, db_url: str
) -> None:
    say(lane, "c1", "I live in Zanzibarville.")
    say(lane, "c2", "I work as a lighthouse keeper.")
    export = list(lane.export_user("u1"))  # taken before the chat is deleted
    lane.delete_conversation("u1", "c1")
    assert contents(lane) == ["User works as a lighthouse keeper."]

    counts = lane.import_user(export, merge=True)
    assert counts["purged_memories"] == 1  # the fingerprint kept it out
    assert contents(lane) == ["User works as a lighthouse keeper."]
    assert lane.list_memories("u1", status="deleted") == []
    # the export's episode of the deleted chat came back redacted: no word of the fact
    assert grep(db_url, "zanzibar") == {}
    with unit_of_work(db_url) as session:
        summaries = session.scalars(select(EpisodeRow.summary).order_by(EpisodeRow.ref)).all()
    assert len(summaries) == 2 and MARKER in summaries[0] and "lighthouse" in summaries[1]
