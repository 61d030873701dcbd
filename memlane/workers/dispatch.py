"""How the front doors hand work to the fleet: job ids to Celery, or to the in-process
worker of the embedded default. Either way only ids travel, and callers see one
protocol: none asks which dispatcher it holds."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial
from typing import Any, Protocol

from memlane.config.settings import Settings
from memlane.pipeline.backoff import compute_backoff
from memlane.pipeline.errors import BrokerUnavailableError
from memlane.workers import reembed, runner, sweeper
from memlane.workers.errors import TransientProviderError

log = logging.getLogger("memlane.dispatch")

# How often the in-process worker runs a stage again after losing the database while it
# held a job (each wait capped at max_retry_sleep_s: about five minutes at the default).
HELD_MAX_RETRIES = 60


class Dispatcher(Protocol):
    def extract(self, job_ids: Sequence[str]) -> None: ...

    def store(self, job_ids: Sequence[str]) -> None: ...

    def record_access(
        self, memory_ids: Sequence[str], accessed_at: datetime | Sequence[datetime]
    ) -> None:
        """Move accessed_at of the memories forward to `accessed_at`: one moment for all,
        or one per id (the batch form, as memlane.service.background.AccessRecorder sends)."""

    def reembed(self, user_ids: Sequence[str], model: str, dim: int) -> None: ...

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until everything handed over has run; False if the timeout came first.
        Workers elsewhere cannot be seen from here: the whole timeout passes, then False."""
        ...

    @property
    def pending(self) -> int | None:
        """How many handed-over items have not run yet; None when workers elsewhere run
        them (nothing is held in this process)."""
        ...

    def close(self) -> None: ...


def one_line_of(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def access_times(accessed_at: datetime | Sequence[datetime]) -> str | list[str]:
    """The task argument: one ISO moment, or one per id; a batch whose moments are all
    the same travels as the one (the message of the single form)."""
    if isinstance(accessed_at, datetime):
        return accessed_at.isoformat()
    moments = set(accessed_at)
    if len(moments) == 1:
        return next(iter(moments)).isoformat()
    return [moment.isoformat() for moment in accessed_at]


def access_argsrepr(memory_ids: Sequence[str], moments: str | list[str]) -> str:
    """What Flower shows of a record_access message: the first id, how many, and when."""
    when = repr(moments) if isinstance(moments, str) else f"{len(moments)} moments"
    count = len(memory_ids)
    first = f"{memory_ids[0]!r}, …" if count > 1 else repr(memory_ids[0])
    return f"([{first}] {count} memory id{'' if count == 1 else 's'}, {when})"


class CeleryDispatcher:
    """Publishes task messages; a worker fleet elsewhere runs them."""

    def __init__(self, settings: Settings) -> None:
        # Celery and its broker client are loaded only here, and configured from these
        # settings (not only the environment's), so a facade built with explicit
        # settings publishes where it was told to.
        from memlane.workers import tasks
        from memlane.workers.app import configure_app

        self._app = configure_app(settings)
        self._tasks = tasks

    def extract(self, job_ids: Sequence[str]) -> None:
        self._publish(self._tasks.extract, job_ids)

    def store(self, job_ids: Sequence[str]) -> None:
        self._publish(self._tasks.store, job_ids)

    def _publish(self, task: Any, job_ids: Sequence[str]) -> None:
        """One message per job (so jobs run in parallel and each is acknowledged on its
        own), through one producer taken from the pool once for them all. A broker that
        cannot take them is a BrokerUnavailableError saying the jobs stay queued."""
        if not job_ids:
            return
        try:
            with self._app.producer_or_acquire() as producer:
                for job_id in job_ids:
                    task.apply_async((job_id,), producer=producer)
        except Exception as exc:
            raise BrokerUnavailableError(
                f"the broker (MEMLANE_BROKER_URL) did not take {len(job_ids)} job(s) "
                f"({type(exc).__name__}: {one_line_of(exc)}); they are stored and stay queued: "
                "beat's sweep publishes them, or run `memlane jobs sweep` once the broker is back",
                job_ids=list(job_ids),
            ) from exc

    def record_access(
        self, memory_ids: Sequence[str], accessed_at: datetime | Sequence[datetime]
    ) -> None:
        if memory_ids:
            ids = list(memory_ids)
            moments = access_times(accessed_at)
            self._tasks.record_access.apply_async(
                (ids, moments),
                # Celery's own repr walks every id (half of a publish's CPU, taken from
                # the assemblies that share this interpreter: bench/README.md); what
                # Flower shows of the task is this summary instead.
                argsrepr=access_argsrepr(ids, moments),
            )

    def reembed(self, user_ids: Sequence[str], model: str, dim: int) -> None:
        for user_id in user_ids:
            self._tasks.reembed_user.apply_async((user_id, model, dim))

    def drain(self, timeout: float | None = None) -> bool:
        time.sleep(timeout or 0.0)
        return False

    @property
    def pending(self) -> int | None:
        return None

    def close(self) -> None:
        return None


class InProcessDispatcher:
    """The embedded default's worker: one background thread runs the same stages the
    Celery tasks run, in order. Meant for the demo, a laptop or a test; a fleet uses
    Celery (set MEMLANE_BROKER_URL)."""

    def __init__(self, settings: Settings, *, max_retry_sleep_s: float = 5.0) -> None:
        self._settings = settings
        self._max_retry_sleep_s = max_retry_sleep_s
        # (what it is, for the log; the call that runs it)
        self._queue: queue.Queue[tuple[str, Callable[[], object]] | None] = queue.Queue()
        self._pending = 0
        self._idle = threading.Condition()
        self._thread = threading.Thread(target=self._work, name="memlane-inprocess", daemon=True)
        self._thread.start()

    def _put(self, what: str, run: Callable[[], object]) -> None:
        with self._idle:
            self._pending += 1
        self._queue.put((what, run))

    def extract(self, job_ids: Sequence[str]) -> None:
        for job_id in job_ids:
            self._put(f"extract {job_id}", partial(self._job, runner.run_extract, job_id))

    def store(self, job_ids: Sequence[str]) -> None:
        for job_id in job_ids:
            self._put(f"store {job_id}", partial(self._job, runner.run_store, job_id))

    def record_access(
        self, memory_ids: Sequence[str], accessed_at: datetime | Sequence[datetime]
    ) -> None:
        if not memory_ids:
            return
        self._put(
            f"record_access of {len(memory_ids)} memories",
            partial(
                sweeper.move_accessed_at_forward,
                list(memory_ids),
                access_times(accessed_at),
                self._settings,
            ),
        )

    def reembed(self, user_ids: Sequence[str], model: str, dim: int) -> None:
        for user_id in user_ids:
            self._put(f"reembed {user_id}", partial(self._reembed, user_id, model, dim))

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every handed-over item ran; False if the timeout came first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._idle:
            while self._pending:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._idle.wait(remaining)
        return True

    @property
    def pending(self) -> int:
        return self._pending

    def close(self, timeout: float = 60.0) -> None:
        """Finish what was handed over (a stage may hand on to the next), then stop."""
        self.drain(timeout)
        self._queue.put(None)
        self._thread.join(timeout=30)

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            what, run = item
            try:
                run()
            except Exception:  # the stage recorded it on the job row; keep the worker alive
                log.exception("in-process %s failed", what)
            finally:
                with self._idle:
                    self._pending -= 1
                    self._idle.notify_all()

    def _job(self, stage: Callable[..., runner.StageOutcome], job_id: str) -> None:
        """One stage of a job, retried here as Celery would; an extraction hands on to
        its store stage. A stage that lost the database while holding the job is run
        again with that claim (`held_since`) once the database answers, as the Celery
        tasks do, so the job does not sit `running` until the stuck sweep; past
        HELD_MAX_RETRIES the sweep takes it back."""
        held: datetime | None = None
        lost = 0
        while True:
            try:
                outcome = stage(job_id, self._settings, held_since=held)
            except runner.DatabaseLost as exc:
                if lost >= HELD_MAX_RETRIES:
                    raise
                held = exc.held_since
                time.sleep(
                    min(
                        compute_backoff(lost, jitter=0.5, retry_after=None), self._max_retry_sleep_s
                    )
                )
                lost += 1
                continue
            held = None  # a requeued or finished job holds nothing
            if outcome.next != "retry":
                break
            time.sleep(min(outcome.retry_in or 0.0, self._max_retry_sleep_s))
        if outcome.next == "store":
            self.store([job_id])

    def _reembed(self, user_id: str, model: str, dim: int) -> None:
        for attempt in range(self._settings.llm_max_retries + 1):
            try:
                reembed.run_reembed_user(user_id, model, dim, self._settings)
                return
            except TransientProviderError as exc:
                if attempt == self._settings.llm_max_retries:
                    raise
                delay = compute_backoff(attempt, jitter=0.5, retry_after=exc.retry_after)
                time.sleep(min(delay, self._max_retry_sleep_s))


def dispatcher_for(settings: Settings, *, started: datetime) -> Dispatcher:
    """The dispatcher the settings ask for. An in-process one first resumes the jobs an
    earlier process left queued (or running when it died) before `started`: no beat runs
    for an embedded worker, so they would wait forever. Jobs queued since are the
    caller's own, handed over as it publishes them."""
    if not settings.embedded_worker:
        return CeleryDispatcher(settings)
    dispatcher = InProcessDispatcher(settings)
    resumed = sweeper.sweep(settings, queued_before=started)
    dispatcher.extract(resumed.extract)
    dispatcher.store(resumed.store)
    return dispatcher
