from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from memlane.models.db import unit_of_work
from memlane.models.schemas import MemoryCreate
from memlane.models.store.memories import edits as memory_changes
from memlane.models.store.memories import memories
from memlane.models.store.reads import assembly as assembly_reads
from memlane.models.store.reads import dedup as dedup_reads
from memlane.pipeline.dedup import plan as dedup
from memlane.pipeline.dedup.keywords import keywords
from memlane.pipeline.errors import NotFoundError
from memlane.pipeline.records import ExtractedMemory
from tests.defaults import DEDUP_MIN_KEYWORDS, DEDUP_THRESHOLD


def add(url: str, now: datetime, content: str, *, user: str = "u1", vector=None, **fields):
    with unit_of_work(url) as s:
        return memories.add(
            s,
            user_id=user,
            memory=MemoryCreate(content=content, **fields),
            keywords=keywords(content),
            embedding=vector,
            embedding_model="test",
            now=now,
        )


def test_dedup_candidates_come_from_the_keyword_index_of_that_user_only(
    db_url: str, now: datetime
) -> None:
    same = add(db_url, now, "User prefers TypeScript for frontend work")
    add(db_url, now, "User prefers TypeScript for frontend work", user="u2")
    add(db_url, now, "User lives in Lisbon with two cats")
    with unit_of_work(db_url) as s:
        text = "The user prefers TypeScript in frontend code"
        found = dedup_reads.candidates(
            s, "u1", [(text, keywords(text))], threshold=0.6, min_keywords=3
        )
    assert [m.id for m in found] == [same.id]


def test_candidates_sharing_too_few_keywords_to_reach_the_threshold_are_not_read(
    db_url: str, now: datetime
) -> None:
    add(db_url, now, "User prefers TypeScript")  # shares 1 of the 5 new keywords
    with unit_of_work(db_url) as s:
        new = [keywords("User prefers Rust for embedded firmware")]
        found = dedup_reads.found(s, "u1", new, threshold=0.6)
    assert found == []


def test_apply_plan_inserts_bumps_and_supersedes(db_url: str, now: datetime) -> None:
    liked = add(db_url, now, "User likes Java for backend services")
    ts = add(db_url, now, "User prefers TypeScript for frontend work")
    later = now + timedelta(hours=2)
    extracted = [
        ExtractedMemory(
            content="User prefers TypeScript for frontend work",
            category="preference",
            importance=0.9,
            confidence=1.0,
        ),
        ExtractedMemory(
            content="User dislikes Java for backend services",
            category="preference",
            importance=0.6,
            confidence=1.0,
        ),
        ExtractedMemory(
            content="User is migrating auth to PostgreSQL",
            category="project",
            importance=0.8,
            confidence=1.0,
        ),
    ]
    sightings = [
        dedup.Sighting.of(m, conversation_id="c9", new_from_seq=0, end_seq=9) for m in extracted
    ]
    with unit_of_work(db_url) as s:
        known = dedup_reads.candidates(
            s,
            "u1",
            [(x.memory.content, x.keywords) for x in sightings],
            threshold=DEDUP_THRESHOLD,
            min_keywords=DEDUP_MIN_KEYWORDS,
        )
        plan = dedup.plan(
            sightings, known, now=later, threshold=DEDUP_THRESHOLD, min_keywords=DEDUP_MIN_KEYWORDS
        )
        inserted = memories.apply_plan(
            s,
            plan,
            user_id="u1",
            job_id="job_x",
            conversation_id="c9",
            vectors=[[1.0, 0.0]] * 3,
            embedding_model="test",
            now=later,
        )
    assert len(inserted) == 2
    with unit_of_work(db_url) as s:
        bumped = memories.get(s, "u1", ts.id)
        assert (bumped.access_count, bumped.importance, bumped.accessed_at) == (2, 0.9, later)
        assert memories.get(s, "u1", liked.id).status == "superseded"
        statuses = {
            memories.get(s, "u1", i).content: memories.get(s, "u1", i).status for i in inserted
        }
    assert statuses == {
        "User dislikes Java for backend services": "active",
        "User is migrating auth to PostgreSQL": "active",
    }


def test_management_changes_are_scoped_to_the_owner(db_url: str, now: datetime) -> None:
    memory = add(db_url, now, "User's name is Maya")
    with pytest.raises(NotFoundError), unit_of_work(db_url) as s:
        memory_changes.set_tier(s, "someone-else", memory.id, "pinned")
    with unit_of_work(db_url) as s:
        assert memory_changes.set_tier(s, "u1", memory.id, "pinned").tier == "pinned"


def test_record_access_moves_accessed_at_forward_only(db_url: str, now: datetime) -> None:
    memory = add(db_url, now, "User's name is Maya")
    with unit_of_work(db_url) as s:
        assert memories.record_access(s, [memory.id], now=now + timedelta(hours=1)) == 1
        assert memories.record_access(s, [memory.id], now=now - timedelta(hours=1)) == 0
        assert memories.get(s, "u1", memory.id).accessed_at == now + timedelta(hours=1)


def test_assembly_reads_only_visible_memories_of_the_user_with_relevance(
    db_url: str, now: datetime
) -> None:
    near = add(db_url, now, "User prefers TypeScript", vector=[1.0, 0.0, 0.0])
    far = add(db_url, now, "User lives in Lisbon", vector=[0.0, 1.0, 0.0])
    pinned = add(db_url, now, "User's name is Maya", vector=[0.0, 0.0, 1.0], tier="pinned")
    hidden = [
        add(db_url, now, "Other user's secret", user="u2", vector=[1.0, 0.0, 0.0]).id,
        add(
            db_url,
            now,
            "Expired fact",
            vector=[1.0, 0.0, 0.0],
            expires_at=now - timedelta(seconds=1),
        ).id,
        add(db_url, now, "Sensitive fact", vector=[1.0, 0.0, 0.0], sensitive=True).id,
    ]
    quarantined = add(db_url, now, "Quarantined fact", vector=[1.0, 0.0, 0.0])
    with unit_of_work(db_url) as s:
        memory_changes.set_status(s, "u1", quarantined.id, "quarantined")
    hidden.append(quarantined.id)
    with unit_of_work(db_url) as s:
        got = assembly_reads.assembly_candidates(
            s,
            "u1",
            now=now,
            strategy="scored",
            query_vector=assembly_reads.QueryVector("test", [0.9, 0.1, 0.0]),
            top_k=10,
        )
    ids = {m.id for m in got.memories}
    assert ids == {near.id, far.id, pinned.id}
    assert not ids & set(hidden)
    assert got.relevance[near.id] == pytest.approx(0.9 / (0.81 + 0.01) ** 0.5, abs=1e-5)
    assert got.relevance[far.id] == pytest.approx(0.1 / (0.81 + 0.01) ** 0.5, abs=1e-5)
    assert got.relevance[pinned.id] == pytest.approx(0.0, abs=1e-6)
    with unit_of_work(db_url) as s:
        sensitive = assembly_reads.assembly_candidates(
            s,
            "u1",
            now=now,
            strategy="recent",
            query_vector=None,
            top_k=10,
            include_sensitive=True,
        )
    assert len(sensitive.memories) == 4 and sensitive.relevance == {}


def test_embeddings_round_trip_on_both_backends(db_url: str, now: datetime) -> None:
    memory = add(db_url, now, "User prefers TypeScript", vector=[0.25, -0.5, 0.125])
    with unit_of_work(db_url) as s:
        row = memories.get(s, "u1", memory.id)
        assert (row.embedding, row.embedding_dim) == ([0.25, -0.5, 0.125], 3)


def test_bumps_of_one_plan_each_take_their_own_values_and_never_move_times_back(
    db_url: str, now: datetime
) -> None:
    # apply_plan sends all the bumps as one statement executed per bump: each row must
    # get its own increment and values, and an older confirmation leaves the times alone.
    first = add(db_url, now, "User likes hiking in the Alps")
    second = add(db_url, now, "User works as a data engineer")
    earlier, later = now - timedelta(days=3), now + timedelta(hours=1)
    plan = dedup.DedupPlan(
        inserts=(),
        bumps=(
            dedup.PlannedBump(first.id, 2, 0.9, 0.8, later, 7, (0,)),
            dedup.PlannedBump(second.id, 1, 0.4, 0.6, earlier, None, (1,)),
        ),
        rereads=(),
        supersedes=(),
    )
    with unit_of_work(db_url) as s:
        memories.apply_plan(
            s,
            plan,
            user_id="u1",
            job_id="job_b",
            conversation_id="c1",
            vectors=[],
            embedding_model="test",
            now=later,
        )
    with unit_of_work(db_url) as s:
        one, two = memories.get(s, "u1", first.id), memories.get(s, "u1", second.id)
        assert (one.access_count, one.importance, one.confidence) == (3, 0.9, 0.8)
        assert (one.confirmed_at, one.accessed_at, one.evidence_seq) == (later, later, 7)
        assert (two.access_count, two.importance, two.confidence) == (2, 0.4, 0.6)
        assert (two.confirmed_at, two.accessed_at, two.evidence_seq) == (now, now, None)
        assert one.change_seq == two.change_seq
