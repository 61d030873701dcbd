"""The facade's control of background work (Memlane inherits it): publishing job ids,
waiting for jobs, reading and retrying them, the sweep, the fleet's status, and
re-embedding users. Every call goes through the `Dispatcher` protocol, whichever
dispatcher this process holds (memlane.workers.dispatch)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from sqlalchemy.exc import SQLAlchemyError

from memlane.models.db import unit_of_work
from memlane.models.schemas import FleetStatus, JobPublic
from memlane.models.store.conversations import jobs
from memlane.models.store.memories import reembed as reembed_store
from memlane.service.fleet_status import StatusCache
from memlane.service.input_checks import checked
from memlane.workers import sweeper
from memlane.workers.embedders import embedder_for
from memlane.workers.sweeper import SweepResult

if TYPE_CHECKING:
    from memlane.config.settings import Settings
    from memlane.workers.dispatch import Dispatcher
    from memlane.workers.embedders import Embedder


log = logging.getLogger("memlane.facade")
# Its own logger: the CLI shows its warning without --debug (cli/common.py).
EMBEDDER_CHECK_LOG = "memlane.embedder_check"


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class ReembedRun:
    """What `Memlane.reembed` started: the target (stored name and dimension) and its users."""

    model: str
    dim: int
    user_ids: tuple[str, ...]


class JobControl:
    """Background work as the front doors see it; mixed into Memlane."""

    if TYPE_CHECKING:
        settings: Settings
        url: str
        _dispatcher: Dispatcher | None
        _status: StatusCache
        _store_checked: bool

        @property
        def dispatcher(self) -> Dispatcher: ...

        @property
        def embedder(self) -> Embedder: ...

    def wait(
        self, job_ids: Sequence[str], *, timeout: float = 300.0, poll_s: float = 0.2
    ) -> dict[str, str]:
        """Block until the jobs are done or failed (or the timeout); returns their status."""
        deadline = time.monotonic() + timeout
        while True:
            statuses = self.job_statuses(job_ids)
            if all(v in ("done", "failed") for v in statuses.values()):
                return statuses
            if time.monotonic() >= deadline:
                return statuses
            self._let_workers_run(poll_s)

    def job_statuses(self, job_ids: Sequence[str]) -> dict[str, str]:
        with unit_of_work(self.url) as session:
            return jobs.status_counts(session, job_ids)

    def _let_workers_run(self, seconds: float) -> None:
        """Up to `seconds` for the workers: less when this process's own worker has
        nothing left to run; the whole time when none was made here (workers elsewhere
        run what the broker took, and are not seen)."""
        if self._dispatcher is None:
            time.sleep(seconds)
        else:
            self._dispatcher.drain(timeout=seconds)

    def stale_embedders(self, embedder: Embedder) -> list[str]:
        """One line per other embedder whose vectors still serve memories of this store,
        e.g. after MEMLANE_EMBEDDING_MODEL changed (the default became minilm) and before
        `memlane reembed`; none when every vector is `embedder`'s."""
        with unit_of_work(self.url) as session:
            found = reembed_store.other_embedders(session, model=embedder.name, dim=embedder.dim)
        return [
            f"{memories:,} {'memory' if memories == 1 else 'memories'} of {users:,} user(s) "
            f"are embedded with {model} ({dim} dims)"
            for model, dim, memories, users in found
        ]

    def warn_of_stale_embedders(self, embedder: Embedder) -> None:
        """A warning naming `memlane reembed` when memories serve another embedder's
        vectors. A warning, not an error: reads still work (the query is embedded with
        each stored embedder, the path a running reembed relies on), and refusing would
        turn an upgrade into an outage and block the facade `memlane reembed` runs in."""
        try:
            stale = self.stale_embedders(embedder)
        except SQLAlchemyError as exc:  # the call that needed the embedder will say it
            log.debug("could not check the store's embedders: %s", exc)
            return
        if stale:
            logging.getLogger(EMBEDDER_CHECK_LOG).warning(
                "%s, not %s (MEMLANE_EMBEDDING_MODEL=%s): they are still found (the query "
                "is embedded with their embedder too), but their users are read from the "
                "store on every assembly instead of the working set, and ranked by the old "
                "embedder; run `memlane reembed` to move them, or set "
                "MEMLANE_EMBEDDING_MODEL to the embedder they were made with",
                "; ".join(stale),
                embedder.name,
                self.settings.embedding_model,
            )

    def reembed(self, to: str | None = None, *, dim: int | None = None) -> ReembedRun:
        """Start moving every user whose memories serve vectors of another embedder to
        `to` (a MEMLANE_EMBEDDING_MODEL value; default: the configured one): one task per
        user, on the store queue or the in-process worker. Old vectors keep serving until
        the user's new ones are all there (models/store/memories/reembed.py)."""
        self._store_checked = True  # no warning to run what is being run
        target = self.embedder if to is None else embedder_for(to, self.settings, dim=dim)
        with unit_of_work(self.url) as session:
            users = reembed_store.users_to_reembed(session, model=target.name, dim=target.dim)
        self.dispatcher.reembed(users, target.name, target.dim)
        return ReembedRun(model=target.name, dim=target.dim, user_ids=tuple(users))

    def reembed_done(self, run: ReembedRun, *, wait_s: float = 0.0) -> set[str]:
        """The users of `run` whose memories all serve its model now. With the in-process
        worker, first lets it work for up to `wait_s` seconds."""
        if wait_s > 0:
            self._let_workers_run(wait_s)
        with unit_of_work(self.url) as session:
            return reembed_store.users_done(session, run.user_ids, model=run.model, dim=run.dim)

    def background_busy(self) -> bool:
        """False when this process's in-process worker has nothing left to run (so waiting
        longer changes nothing); True with a broker, whose workers cannot be seen here."""
        pending = None if self._dispatcher is None else self._dispatcher.pending
        return pending is None or pending > 0

    # ------------------------------------------------------------------ jobs, packs

    @checked("job_id")
    def job(self, job_id: str) -> JobPublic:
        with unit_of_work(self.url) as session:
            return jobs.to_public(jobs.load(session, job_id))

    @checked("user_id")
    def jobs(
        self, *, status: str | None = None, user_id: str | None = None, limit: int = 100
    ) -> list[JobPublic]:
        with unit_of_work(self.url) as session:
            return jobs.list_jobs(session, status=status, user_id=user_id, limit=limit)  # type: ignore[arg-type]

    @checked("job_id")
    def retry_job(self, job_id: str) -> JobPublic:
        with unit_of_work(self.url) as session:
            stuck_after = timedelta(seconds=self.settings.stuck_after_s)
            job = jobs.retry(session, job_id, now=_now(), stuck_after=stuck_after)
            public = jobs.to_public(job)
        self._publish(public.stage, [job_id])
        return public

    def sweep(self) -> SweepResult:
        """Publish every queued job again (one whose message never reached the broker,
        or was lost), release jobs stuck past MEMLANE_STUCK_AFTER_S and start the tails of
        idle conversations: what beat's periodic sweep does, at once, for queued jobs of
        any age. Publishing a job twice is harmless: the tasks claim it once."""
        result = sweeper.sweep(self.settings, queued_before=_now())
        self._publish("extract", result.extract)
        self._publish("store", result.store)
        return result

    def status(self) -> FleetStatus:
        """Whether workers answer for each queue, and the queues' depths: `ok` or
        `degraded` (memlane.service.fleet_status); checked at most every few seconds."""
        return self._status.get()

    def _publish(self, stage: str, job_ids: Sequence[str]) -> None:
        """Hand job ids to the fleet; a broker that cannot take them is a
        BrokerUnavailableError saying the jobs stay queued for the sweep."""
        if job_ids:
            (self.dispatcher.extract if stage == "extract" else self.dispatcher.store)(job_ids)
