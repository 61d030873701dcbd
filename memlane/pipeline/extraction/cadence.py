"""When extraction is due, and over which messages. Pure arithmetic on message seqs.

Messages of a conversation are numbered 0..message_count-1. `extracted_to_seq` is the last
seq an extraction job has covered (-1 when none has).

Due points: extraction is due after every `every`-th assistant message of the conversation,
counted from its start (the 5th, 10th, 15th ... with every=5). The window of a due point
ending at seq `end` is the last `window` messages: [max(0, end - window + 1), end].
Its NEW part starts after the previous window's end (or after extracted_to_seq):
new_from_seq = max(start, previous_end + 1); the rest of the window is context.

Nothing is skipped: when more than `window` messages separate a due point from the
previous end (a huge transcript arriving at once, or long runs of user messages), the gap
is first cut into windows of `window` messages, each entirely new, so every seq up to the
last due point lies in exactly one NEW part.

Idempotent: a window whose end_seq <= extracted_to_seq is not due again.

Tail: when the conversation is over (`final`), or for the idle sweep (`tail_windows`), the
messages after the last covered seq are due even without a due point: the same rule with
the conversation's last message (seq message_count - 1) as the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise


@dataclass(frozen=True, slots=True)
class WindowSpec:
    start_seq: int
    end_seq: int
    new_from_seq: int  # start_seq <= new_from_seq <= end_seq; earlier seqs are context


def _check(message_count: int, extracted_to_seq: int, window: int) -> None:
    if message_count < 0:
        raise ValueError(f"message_count must be >= 0, not {message_count}")
    if window < 1:
        raise ValueError(f"window must be >= 1, not {window}")
    if not -1 <= extracted_to_seq <= message_count - 1:
        raise ValueError(f"extracted_to_seq {extracted_to_seq} is outside -1..{message_count - 1}")


def _windows_to(end: int, *, covered_to: int, window: int) -> list[WindowSpec]:
    """Windows whose NEW parts cover exactly covered_to+1 .. end, the last ending at end."""
    windows: list[WindowSpec] = []
    first_new = covered_to + 1
    while end - first_new + 1 > window:
        chunk_end = first_new + window - 1
        windows.append(WindowSpec(start_seq=first_new, end_seq=chunk_end, new_from_seq=first_new))
        first_new = chunk_end + 1
    start = max(0, end - window + 1)
    windows.append(WindowSpec(start_seq=start, end_seq=end, new_from_seq=max(start, first_new)))
    return windows


def tail_windows(*, message_count: int, extracted_to_seq: int, window: int) -> list[WindowSpec]:
    """Windows for the messages after extracted_to_seq, ending at the last message.

    Empty when everything is covered. Usually one window; more only when over `window`
    messages are uncovered (see the module docstring).
    """
    _check(message_count, extracted_to_seq, window)
    last = message_count - 1
    if last <= extracted_to_seq:
        return []
    return _windows_to(last, covered_to=extracted_to_seq, window=window)


def due_windows(
    *,
    assistant_seqs: Sequence[int],
    message_count: int,
    extracted_to_seq: int,
    every: int,
    window: int,
    final: bool = False,
) -> list[WindowSpec]:
    """Extraction windows due now, in seq order (see the module docstring for the rule).

    assistant_seqs: the seqs of the conversation's assistant messages, all of them from
    seq 0 on, strictly increasing.
    """
    _check(message_count, extracted_to_seq, window)
    if every < 1:
        raise ValueError(f"every must be >= 1, not {every}")
    if any(b <= a for a, b in pairwise(assistant_seqs)):
        raise ValueError("assistant_seqs must be strictly increasing")
    if assistant_seqs and not 0 <= assistant_seqs[0] <= assistant_seqs[-1] < message_count:
        raise ValueError(f"assistant_seqs must lie within 0..{message_count - 1}")
    windows: list[WindowSpec] = []
    covered_to = extracted_to_seq
    for end in assistant_seqs[every - 1 :: every]:
        if end <= covered_to:
            continue
        windows.extend(_windows_to(end, covered_to=covered_to, window=window))
        covered_to = end
    if final:
        windows.extend(
            tail_windows(message_count=message_count, extracted_to_seq=covered_to, window=window)
        )
    return windows


def why_no_window(*, assistant_count: int, every: int, final: bool) -> str:
    """Why `due_windows` gave nothing, for a person who enqueued a transcript and got no
    job: short of the next due point, or (final) every message already covered."""
    if final:
        return "every message is already covered by an extraction"
    due_at = (assistant_count // every + 1) * every
    return (
        f"no extraction due yet: the conversation has {assistant_count} assistant "
        f"message(s) and one is due every {every} (the next after {due_at - assistant_count} "
        'more); mark the transcript final ("final": true, memlane enqueue --final) to '
        "extract it now"
    )
