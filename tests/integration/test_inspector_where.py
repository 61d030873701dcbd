""" "Where is <text>?" (memlane.service.inspector.where_is) on both backends: each place a
fact can be (a candidate of the pack, a memory that was no candidate, a purged memory's
fingerprint, a message no job made a memory of, nowhere) gets its own sentence."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from memlane.config.settings import load_settings
from memlane.service.facade import Memlane
from memlane.service.inspector.pack_view import PackView, stored_pack
from memlane.service.inspector.where_is import Answer, where_is

USER = "where-u1"


@pytest.fixture
def lane(db_url: str) -> Iterator[Memlane]:
    with Memlane(load_settings(database_url=db_url)) as lane:
        yield lane


@pytest.fixture
def view(lane: Memlane) -> PackView:
    add = lane.add_memory
    add(USER, {"content": "The user is vegetarian", "category": "fact"})
    jazz = add(USER, {"content": "The user listens to jazz records", "category": "preference"})
    lane.forget(USER, jazz.id)
    boat = add(USER, {"content": "The user owns a sailing boat in Porto", "category": "fact"})
    lane.purge(USER, boat.id)
    pack = lane.assemble(USER, "what does the user eat?", budget_tokens=400)
    lane.flush()
    add(USER, {"content": "The user started learning Portuguese", "category": "fact"})
    # after the pack: the conversation's episode (which says it too) is no candidate
    result = lane.enqueue(
        {
            "conversation_id": "where-c1",
            "user_id": USER,
            "final": True,
            "messages": [
                {"role": "user", "content": "Which tram goes to the castle?"},
                {"role": "assistant", "content": "The 28 tram climbs to the castle."},
            ],
        }
    )
    assert set(lane.wait(result.job_ids, timeout=60).values()) == {"done"}
    return stored_pack(lane.url, str(pack.pack_data["pack_id"]), relevance_floor=0.5)


def ask(lane: Memlane, view: PackView, text: str) -> Answer:
    s = lane.settings
    return where_is(
        lane.url,
        view,
        text,
        dedup_threshold=s.dedup_threshold,
        dedup_min_keywords=s.dedup_min_keywords,
    )


def test_a_candidate_says_its_fate(lane: Memlane, view: PackView) -> None:
    answer = ask(lane, view, "VEGETARIAN")  # any case
    assert answer.sentence.startswith("It was in the pack: memory m")
    assert answer.candidate_id == answer.memory_id
    assert answer.candidate_id in {row.id for row in view.included}


def test_a_forgotten_memory_was_no_candidate(lane: Memlane, view: PackView) -> None:
    answer = ask(lane, view, "jazz records")
    assert answer.sentence.endswith("says it, but it was forgotten.")
    assert answer.candidate_id is None and answer.memory_id is not None


def test_a_memory_stored_later_could_not_be_in_the_pack(lane: Memlane, view: PackView) -> None:
    answer = ask(lane, view, "learning Portuguese")
    assert "was stored after the pack was assembled" in answer.sentence


def test_a_purged_memory_leaves_its_fingerprint(lane: Memlane, view: PackView) -> None:
    answer = ask(lane, view, "The user owns a sailing boat in Porto")
    assert answer.sentence.startswith("A memory saying it was purged")
    assert answer.memory_id is None


def test_a_message_no_job_made_a_memory_of(lane: Memlane, view: PackView) -> None:
    answer = ask(lane, view, "28 tram")
    assert answer.sentence.startswith(
        "No memory says it; the assistant said it in message 1 of where-c1, read by job "
    )
    assert answer.sentence.endswith("(which extracted no memory of it).")


def test_nothing_says_it(lane: Memlane, view: PackView) -> None:
    assert ask(lane, view, "xylophone").sentence == (
        f"Nothing memlane holds of {USER} says 'xylophone'."
    )
