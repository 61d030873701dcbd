"""The cyclic garbage collector paused while a working set builds a user's view.

A view is tens of thousands of new containers that all live on (rows, keyword lists,
postings), none of them garbage. CPython starts a young collection every 700 new
containers and, every ten of those, an older one, and every ten of those may walk the
whole heap: a 10k user's load set off ~42 young, ~4 middle and a third of a full
collection, ~35–48 ms of its ~140 ms of CPU (bench/README.md), all of it finding nothing.
Paused, the load's containers are looked at once, by the first collection after it.
(Mercurial's `util.nogc` does the same around its bulk loads.)

The collector is the process's: while any thread is inside `paused()` no thread's
garbage cycles are collected (reference counting still frees everything else), so it
is held only around a load, whose length bench/README.md states (~0.1 s at 10k, ~2 s at
100k). Nested and concurrent pauses end when the last does; a collector that was off
before stays off.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0  # threads inside `paused()`
_resume = False  # whether the last to leave turns the collector back on


@contextmanager
def paused() -> Iterator[None]:
    """No cyclic garbage collection while the block runs (module docstring)."""
    global _depth, _resume
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()
