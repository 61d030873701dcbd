"""The collector paused around a working set's load (models/collector.py): off inside,
back on after the last of nested or concurrent pauses, and left off when it was off."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from memlane.models import collector


@pytest.fixture(autouse=True)
def _collector_on() -> Iterator[None]:
    gc.enable()
    yield
    gc.enable()


def test_the_collector_is_off_inside_and_on_after() -> None:
    with collector.paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_the_collector_comes_back_after_an_error() -> None:
    with pytest.raises(ValueError), collector.paused():
        raise ValueError
    assert gc.isenabled()


def test_nested_and_concurrent_pauses_end_with_the_last() -> None:
    inside, leave = threading.Event(), threading.Event()

    def other_load() -> None:
        with collector.paused():
            inside.set()
            leave.wait(10)

    thread = threading.Thread(target=other_load)
    with collector.paused():
        with collector.paused():
            pass
        assert not gc.isenabled()  # the nested pause ended, the outer one did not
        thread.start()
        inside.wait(10)
    assert not gc.isenabled()  # the other thread's load still runs
    leave.set()
    thread.join(10)
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with collector.paused():
        pass
    assert not gc.isenabled()
