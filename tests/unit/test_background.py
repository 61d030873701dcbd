"""Access records coalesced off the request path (memlane.service.background.AccessRecorder), and
which packs refused by an unavailable database are saved again (packs_to_retry)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from memlane.service.background import AccessRecorder, PackRow, packs_to_retry

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
T1 = T0 + timedelta(seconds=1)


class Published:
    def __init__(self, fail: int = 0) -> None:
        self.calls: list[dict[str, datetime]] = []
        self.fail = fail

    def __call__(self, ids: Sequence[str], times: Sequence[datetime]) -> None:
        if self.fail:
            self.fail -= 1
            raise ConnectionError("broker down")
        self.calls.append(dict(zip(ids, times, strict=True)))


def recorder(published: Published, **options: int) -> AccessRecorder:
    # an interval no test waits for: only flush publishes
    return AccessRecorder(published, interval_s=3600, **options)


def test_ids_of_several_calls_go_in_one_publish_each_with_its_latest_moment() -> None:
    published = Published()
    accesses = recorder(published)
    accesses.add(["a", "b"], T1)
    accesses.add(["b", "c"], T0)  # an older moment never moves b back
    accesses.flush()
    assert published.calls == [{"a": T1, "b": T1, "c": T0}]
    accesses.flush()
    assert len(published.calls) == 1  # nothing pending: nothing published
    accesses.close()


def test_the_thread_publishes_every_interval() -> None:
    published = Published()
    accesses = AccessRecorder(published, interval_s=0.01)
    accesses.add(["a"], T0)
    for _ in range(500):
        if published.calls:
            break
        time.sleep(0.01)
    assert published.calls == [{"a": T0}]
    accesses.close()


def test_close_publishes_what_is_pending() -> None:
    published = Published()
    accesses = recorder(published)
    accesses.add(["a"], T0)
    accesses.close()
    assert published.calls == [{"a": T0}]


def test_a_failed_publish_keeps_its_ids_for_the_next(caplog: pytest.LogCaptureFixture) -> None:
    published = Published(fail=1)
    accesses = recorder(published)
    accesses.add(["a"], T0)
    accesses.flush()
    assert published.calls == [] and "could not publish 1 access records" in caplog.text
    accesses.add(["a"], T1)
    accesses.flush()
    assert published.calls == [{"a": T1}]
    accesses.close()


def test_overload_leaves_ids_out_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    published = Published()
    accesses = recorder(published, max_pending=2)
    accesses.add(["a", "b", "c", "d"], T0)
    accesses.add(["a"], T1)  # already pending: still moves forward
    with caplog.at_level(logging.WARNING, logger="memlane.packs"):
        accesses.flush()
    assert published.calls == [{"a": T1, "b": T0}]
    assert "2 memory ids were left out" in caplog.text
    accesses.close()


def pack(name: str, assembled_at: datetime) -> PackRow:
    return (name, "u1", assembled_at, "{}")


def test_packs_older_than_the_window_are_given_up_and_counted() -> None:
    now = T0 + timedelta(minutes=10)
    rows = [pack("old", T0), pack("edge", now - timedelta(minutes=5)), pack("new", now)]
    kept, given_up = packs_to_retry(rows, now=now, window=timedelta(minutes=5), limit=10)
    assert [row[0] for row in kept] == ["edge", "new"]
    assert given_up == 1


def test_past_the_limit_the_newest_packs_are_kept() -> None:
    rows = [pack(f"p{n}", T0 + timedelta(seconds=n)) for n in (3, 1, 4, 2)]
    kept, given_up = packs_to_retry(
        rows, now=T1 + timedelta(seconds=5), window=timedelta(minutes=5), limit=2
    )
    assert [row[0] for row in kept] == ["p3", "p4"]
    assert given_up == 2
    assert packs_to_retry(rows, now=T1, window=timedelta(minutes=5), limit=0) == ([], 4)
