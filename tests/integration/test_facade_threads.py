"""A Memlane shared by threads: what it builds on first use is built once, however many
threads arrive together."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from memlane.config.settings import load_settings
from memlane.service.facade import Memlane

THREADS = 8


@pytest.fixture
def switch_often() -> Iterator[None]:
    # the interpreter switches threads every few microseconds instead of every 5 ms, so
    # threads released together interleave inside the few lines that build a member
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def built_by_threads_at_once(build: Callable[[], Any]) -> list[Any]:
    """What `build` returned to each of THREADS threads released together."""
    start = threading.Barrier(THREADS)
    got: list[Any] = [None] * THREADS

    def run(i: int) -> None:
        start.wait()
        got[i] = build()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return got


@pytest.mark.parametrize("member", ["_working_set", "_pack_writer", "_access_recorder"])
def test_threads_arriving_together_share_one_member(
    db_url: str, switch_often: None, member: str
) -> None:
    for _ in range(20):  # each round a fresh facade: one race per round
        with Memlane(load_settings(database_url=db_url, working_set_mb=64)) as lane:
            got = built_by_threads_at_once(getattr(lane.contexts, member))
            assert got[0] is not None
            assert all(one is got[0] for one in got)
