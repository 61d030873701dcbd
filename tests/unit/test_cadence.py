"""Extraction cadence: due after every 5th assistant message, over the last 20 messages,
nothing extracted twice and nothing skipped."""

from __future__ import annotations

from functools import partial

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlane.pipeline.extraction import cadence as cadence_rules
from memlane.pipeline.extraction.cadence import WindowSpec, why_no_window
from tests.defaults import EXTRACT_EVERY, EXTRACT_WINDOW

# The settings' defaults, passed as memlane's callers pass the settings.
due_windows = partial(cadence_rules.due_windows, every=EXTRACT_EVERY, window=EXTRACT_WINDOW)
tail_windows = partial(cadence_rules.tail_windows, window=EXTRACT_WINDOW)


def alternating(count: int) -> list[int]:
    """Assistant seqs of a conversation user, assistant, user, ... of `count` messages."""
    return [seq for seq in range(count) if seq % 2 == 1]


def W(start: int, end: int, new_from: int) -> WindowSpec:  # short: the tables below read as rows
    return WindowSpec(start_seq=start, end_seq=end, new_from_seq=new_from)


@pytest.mark.parametrize(
    ("message_count", "extracted_to_seq", "final", "expected"),
    [
        # 4 assistant messages: nothing due yet
        (8, -1, False, []),
        # the 5th assistant message is seq 9: one window, all new
        (10, -1, False, [W(0, 9, 0)]),
        (11, -1, False, [W(0, 9, 0)]),
        # 10 assistant messages: two windows, the second's first half is context
        (20, -1, False, [W(0, 9, 0), W(0, 19, 10)]),
        # 15: the third window starts at 29 - 20 + 1 = 10
        (30, -1, False, [W(0, 9, 0), W(0, 19, 10), W(10, 29, 20)]),
        # already extracted windows are not due again
        (30, 19, False, [W(10, 29, 20)]),
        (30, 29, False, []),
        (30, 9, False, [W(0, 19, 10), W(10, 29, 20)]),
        # a tail extraction (idle sweep) moved extracted_to_seq past a due point
        (20, 13, False, [W(0, 19, 14)]),
        # final: the messages after the last due point form a tail window
        (24, -1, True, [W(0, 9, 0), W(0, 19, 10), W(4, 23, 20)]),
        (3, -1, True, [W(0, 2, 0)]),
        # final with nothing after the last due point: no tail
        (20, -1, True, [W(0, 9, 0), W(0, 19, 10)]),
        (24, 23, True, []),
    ],
)
def test_due_windows_of_an_alternating_conversation(
    message_count, extracted_to_seq, final, expected
):
    windows = due_windows(
        assistant_seqs=alternating(message_count),
        message_count=message_count,
        extracted_to_seq=extracted_to_seq,
        final=final,
    )
    assert windows == expected


def test_a_huge_transcript_arriving_at_once_gets_one_window_per_due_point():
    windows = due_windows(assistant_seqs=alternating(120), message_count=120, extracted_to_seq=-1)
    assert len(windows) == 12
    assert windows[0] == W(0, 9, 0)
    assert windows[1:] == [W(end - 19, end, end - 9) for end in range(19, 120, 10)]


def test_a_gap_longer_than_the_window_is_cut_into_windows_so_nothing_is_skipped():
    # 30 user messages, then 5 assistant messages at seqs 30..34
    windows = due_windows(
        assistant_seqs=[30, 31, 32, 33, 34], message_count=35, extracted_to_seq=-1
    )
    assert windows == [W(0, 19, 0), W(15, 34, 20)]


def test_every_and_window_are_parameters():
    windows = due_windows(
        assistant_seqs=[1, 3, 5], message_count=6, extracted_to_seq=-1, every=1, window=3
    )
    assert windows == [W(0, 1, 0), W(1, 3, 2), W(3, 5, 4)]


@pytest.mark.parametrize(
    ("message_count", "extracted_to_seq", "window", "expected"),
    [
        (0, -1, 20, []),
        (10, 9, 20, []),
        (10, -1, 20, [W(0, 9, 0)]),
        (30, 24, 20, [W(10, 29, 25)]),
        (50, 4, 20, [W(5, 24, 5), W(25, 44, 25), W(30, 49, 45)]),
    ],
)
def test_tail_windows(message_count, extracted_to_seq, window, expected):
    assert (
        tail_windows(message_count=message_count, extracted_to_seq=extracted_to_seq, window=window)
        == expected
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"assistant_seqs": [3, 1]}, "strictly increasing"),
        ({"assistant_seqs": [1, 1]}, "strictly increasing"),
        ({"assistant_seqs": [1, 12]}, "within 0..9"),
        ({"assistant_seqs": [-1, 2]}, "within 0..9"),
        ({"extracted_to_seq": 10}, "outside -1..9"),
        ({"extracted_to_seq": -2}, "outside -1..9"),
        ({"every": 0}, "every"),
        ({"window": 0}, "window"),
        ({"message_count": -1, "assistant_seqs": []}, "message_count"),
    ],
)
def test_bad_arguments_are_refused(kwargs, message):
    arguments = {"assistant_seqs": [1, 3], "message_count": 10, "extracted_to_seq": -1} | kwargs
    with pytest.raises(ValueError, match=message):
        due_windows(**arguments)


conversations = st.lists(st.sampled_from(["user", "assistant"]), max_size=200)


@settings(max_examples=400)
@given(
    conversations,
    st.integers(1, 7),
    st.integers(1, 25),
    st.booleans(),
    st.integers(-1, 199),
)
def test_new_parts_are_disjoint_contiguous_and_cover_everything_due(
    roles, every, window, final, extracted_to_seq
):
    extracted_to_seq = min(extracted_to_seq, len(roles) - 1)
    assistant_seqs = [seq for seq, role in enumerate(roles) if role == "assistant"]
    windows = due_windows(
        assistant_seqs=assistant_seqs,
        message_count=len(roles),
        extracted_to_seq=extracted_to_seq,
        every=every,
        window=window,
        final=final,
    )
    due_points = [end for end in assistant_seqs[every - 1 :: every] if end > extracted_to_seq]
    last_due = due_points[-1] if due_points else extracted_to_seq
    covered_to = len(roles) - 1 if final else last_due
    new_seqs = [s for w in windows for s in range(w.new_from_seq, w.end_seq + 1)]
    assert new_seqs == list(range(extracted_to_seq + 1, covered_to + 1))
    for w in windows:
        assert 0 <= w.start_seq <= w.new_from_seq <= w.end_seq < len(roles)
        assert w.end_seq - w.start_seq + 1 <= window
        # the window holds as much context as is available, up to its size
        assert w.start_seq == max(0, w.end_seq - window + 1) or w.start_seq == w.new_from_seq
    ends = {w.end_seq for w in windows}
    assert set(due_points) <= ends


@given(conversations, st.integers(0, 200), st.integers(1, 7), st.integers(1, 25))
def test_incremental_arrival_gives_the_same_windows_as_one_batch(roles, split, every, window):
    split = min(split, len(roles))
    assistant_seqs = [seq for seq, role in enumerate(roles) if role == "assistant"]
    batch = due_windows(
        assistant_seqs=assistant_seqs,
        message_count=len(roles),
        extracted_to_seq=-1,
        every=every,
        window=window,
    )
    first = due_windows(
        assistant_seqs=[s for s in assistant_seqs if s < split],
        message_count=split,
        extracted_to_seq=-1,
        every=every,
        window=window,
    )
    extracted_to = first[-1].end_seq if first else -1
    second = due_windows(
        assistant_seqs=assistant_seqs,
        message_count=len(roles),
        extracted_to_seq=extracted_to,
        every=every,
        window=window,
    )
    assert first + second == batch
    # and asking again once everything is extracted finds nothing due
    done_to = batch[-1].end_seq if batch else -1
    assert (
        due_windows(
            assistant_seqs=assistant_seqs,
            message_count=len(roles),
            extracted_to_seq=done_to,
            every=every,
            window=window,
        )
        == []
    )


@pytest.mark.parametrize(("assistants", "more"), [(0, 5), (3, 2), (4, 1), (5, 5), (7, 3)])
def test_why_no_window_says_how_far_the_next_due_point_is(assistants: int, more: int) -> None:
    # a conversation user, assistant, ... whose due points are all extracted already
    count = 2 * assistants
    seqs = alternating(count)
    covered = seqs[-1] if seqs else -1
    assert due_windows(assistant_seqs=seqs, message_count=count, extracted_to_seq=covered) == []

    reason = why_no_window(assistant_count=assistants, every=5, final=False)
    assert f"has {assistants} assistant message(s)" in reason
    assert f"one is due every 5 (the next after {more} more)" in reason
    assert "memlane enqueue --final" in reason and '"final": true' in reason


def test_why_no_window_of_a_final_transcript_is_that_all_is_covered() -> None:
    assert due_windows(assistant_seqs=[1, 3], message_count=4, extracted_to_seq=3, final=True) == []
    assert why_no_window(assistant_count=2, every=5, final=True) == (
        "every message is already covered by an extraction"
    )
