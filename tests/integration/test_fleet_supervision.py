"""The drills' fleet (bench.fleet) starts again a worker that exited on its own, as the
deployment's supervisor does, and says what exited: a crash no drill caused is noted,
and the run it happened in does not wait out its deadline for a worker that is gone."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.fleet import running_fleet

pytestmark = pytest.mark.timeout(180)


def test_a_worker_that_exited_on_its_own_is_started_again(
    pg: str, redis_url: str, tmp_path: Path
) -> None:
    with running_fleet(pg, redis_url, tmp_path, settings={}) as fleet:
        assert fleet.restart_exited() == []  # nothing exited: nothing started
        gone = fleet.workers["store"]
        gone.kill()
        restarted = fleet.restart_exited()
        assert restarted == ["store (exit -9: no critical line)"]
        again = fleet.workers["store"]
        assert again is not gone and again.proc.poll() is None
        assert fleet.workers["extract"].proc.poll() is None
        assert fleet.restart_exited() == []
