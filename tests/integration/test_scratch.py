"""Two runs of the suite, and the workers of one, never share a database
(tests/scratch.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bench.common import ROOT
from tests import scratch


def test_every_slot_and_worker_has_its_own_databases() -> None:
    places = [
        scratch.scratch_for(slot, worker)
        for slot in range(scratch.SLOTS)
        for worker in (None, "gw1", "gw2", "gw6")
    ]
    serial = places[0]
    assert serial.pg_db == scratch.BASE_DB and serial.redis_url.endswith("/15")
    assert places[-1].pg_db == f"{scratch.BASE_DB}_s1_gw6"
    assert places[-1].redis_url.endswith("/2")  # 0 and 1, applications' defaults, are left
    # a run without xdist and worker gw0 of a run with it share Redis database 15: they
    # never run at once (a run is one or the other)
    assert len({p.pg_db for p in places}) == len(places)
    assert len({p.redis_url for p in places}) == len(places)
    assert scratch.scratch() in [
        scratch.scratch_for(slot, os.environ.get("PYTEST_XDIST_WORKER"))
        for slot in range(scratch.SLOTS)
    ]


def test_an_eighth_worker_is_refused_by_name() -> None:
    with pytest.raises(RuntimeError, match="at most 7 test workers"):
        scratch.scratch_for(0, "gw7")


def test_a_second_run_takes_another_slot_while_this_one_holds_its_own() -> None:
    held = int(os.environ[scratch.SLOT_VARIABLE])
    other = subprocess.run(
        [sys.executable, "-c", "from tests import scratch; print(scratch.take_slot())"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if other.returncode == 0:
        assert int(other.stdout) != held
    else:  # every slot taken (this run's and another's): refused, saying why
        assert "test runs on" in other.stderr
