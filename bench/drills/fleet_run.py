"""One drill run through a real fleet: enqueue a corpus while the workers run, let the
drill do its damage at progress marks, wait for every job, and say what the store holds.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import flush_redis, truncate
from bench.drills.common import StoreState, Verdict, store_state
from bench.fleet import Fleet, job_counts, running_fleet, wait_all_finished
from memlane.config.settings import load_settings
from memlane.pipeline.errors import BrokerUnavailableError
from memlane.service.facade import Memlane

# The sweep republishes what the broker lost or a killed worker held, after this long
# without progress (production: 600 s); a drill cannot wait ten minutes.
DRILL_SETTINGS = {"stuck_after_s": "10", "sweep_every_s": "1"}


@dataclass
class RunResult:
    counts: dict[str, int]
    state: StoreState
    seconds: float
    # enqueues that raised and stored nothing
    enqueue_errors: list[str] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    # workers that exited on their own and were started again, as a supervisor does
    restarts: list[str] = field(default_factory=list)
    # enqueues that raised BrokerUnavailableError: the transcript is stored and its jobs
    # stay queued for the sweep, as the error says, so they must end done like the rest
    enqueues_kept: list[str] = field(default_factory=list)


Damage = Callable[[Fleet, dict[str, int]], dict[str, Any] | None]


def run_corpus(
    db_url: str,
    broker_url: str,
    corpus: Sequence[dict[str, Any]],
    *,
    users: int,
    per_user: int,
    marks: Sequence[float] = (),
    damage: Damage | None = None,
    timeout: float = 600.0,
    enqueue_threads: int = 4,
    extract_concurrency: int = 8,
    **settings: str,
) -> RunResult:
    """Truncate, start the fleet (with beat), enqueue `corpus` from a few threads, and
    call `damage(fleet, counts)` once the share of finished jobs passes each mark."""
    truncate(db_url)
    flush_redis(broker_url)
    errors: list[str] = []
    kept: list[str] = []
    events: list[dict[str, Any]] = []
    restarts: list[str] = []
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory() as logs,
        running_fleet(
            db_url,
            broker_url,
            Path(logs),
            settings={**DRILL_SETTINGS, **settings},
            beat=True,
            extract_concurrency=extract_concurrency,
        ) as fleet,
    ):
        lane = Memlane(load_settings(database_url=db_url, broker_url=broker_url))
        feeder = threading.Thread(
            target=_enqueue, args=(lane, corpus, enqueue_threads, errors, kept), daemon=True
        )
        feeder.start()

        def supervise() -> None:
            restarts.extend(fleet.restart_exited())

        for mark in marks:
            counts = _wait_for_share(db_url, len(corpus), mark, timeout, supervise)
            if damage is not None:
                event = damage(fleet, counts)
                if event:
                    events.append({"at_share": mark, **event})
        feeder.join(timeout)
        counts = wait_all_finished(db_url, len(corpus), timeout=timeout, on_poll=supervise)
        lane.close()
    state = store_state(db_url, users, per_user)
    return RunResult(counts, state, time.monotonic() - started, errors, events, restarts, kept)


def _enqueue(
    lane: Memlane,
    corpus: Sequence[dict[str, Any]],
    threads: int,
    errors: list[str],
    kept: list[str],
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def one(item: dict[str, Any]) -> None:
        try:
            lane.enqueue(item)
        except BrokerUnavailableError as exc:  # stored; the sweep publishes its jobs
            kept.append(f"{type(exc).__name__}: {exc}"[:300])
        except Exception as exc:  # recorded: a drill says what the caller saw
            errors.append(f"{type(exc).__name__}: {exc}"[:300])

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, corpus))


def _wait_for_share(
    db_url: str, total: int, share: float, timeout: float, on_poll: Callable[[], None]
) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    while True:
        on_poll()
        counts = job_counts(db_url)
        finished = counts.get("done", 0) + counts.get("failed", 0)
        if finished >= share * total or time.monotonic() > deadline:
            return counts
        time.sleep(0.05)


def note_restarts(verdict: Verdict, label: str, run: RunResult) -> None:
    """A crash the drill did not cause: the run went on as under a supervisor; say so."""
    verdict.note(f"{label}workers that exited on their own, started again", len(run.restarts))
    for restart in run.restarts:
        verdict.note(f"{label}exited", restart)
