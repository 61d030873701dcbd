"""The two stages of a job, shared by the Celery tasks and the in-process worker.

Each stage: claim the job row atomically, do the work, save through the store, and say
what comes next. Every failure ends on the job row: requeued with its reason for a retry,
or failed with it. A claim that finds nothing to do (done, at another stage, held by a
live worker) makes a redelivered message a no-op.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from memlane.config.settings import Settings
from memlane.models.db import one_statement, unit_of_work
from memlane.models.store import metadata_writes
from memlane.models.store.conversations import job_windows, jobs
from memlane.models.store.memories import fingerprints, memories, scopes, scrub
from memlane.models.store.reads import dedup as dedup_reads
from memlane.models.store.users import change_feed as changes
from memlane.models.store.users import context_items
from memlane.models.tables import Job
from memlane.pipeline.backoff import compute_backoff
from memlane.pipeline.dedup import plan as dedup
from memlane.pipeline.dedup.fingerprints import suppressed_indices
from memlane.pipeline.errors import ExtractionError, MemlaneError
from memlane.pipeline.extraction.offline.extractor import extract_offline
from memlane.pipeline.ranking import tiers
from memlane.pipeline.records import Extraction, ExtractionWindow
from memlane.pipeline.scope import insert_scope, memory_scope, promoted
from memlane.workers.embedders import get_embedder
from memlane.workers.errors import PermanentProviderError, TransientProviderError
from memlane.workers.indexing import index_if_large

log = logging.getLogger("memlane.worker")

OFFLINE_MODEL = "offline"
# An unusable answer is worth a few more tries (models are not deterministic), not many.
MAX_INVALID_ANSWER_ATTEMPTS = 3

Next = Literal["store", "done", "retry", "failed", "skipped"]


@dataclass(frozen=True, slots=True)
class StageOutcome:
    next: Next
    retry_in: float | None = None
    detail: str = ""


class DatabaseLost(Exception):
    """The database went away while a stage held its job (claimed at `held_since`, the
    claim's started_at): the caller retries the stage with `held_since`, whose first act,
    once the database answers again, is to release that claim (jobs.release). Without it
    the job stays `running` until the stuck sweep, as the retry's claim finds it held."""

    def __init__(self, job_id: str, held_since: datetime) -> None:
        super().__init__(f"the database went away while job {job_id} was running")
        self.job_id = job_id
        self.held_since = held_since


def utcnow() -> datetime:
    return datetime.now(UTC)


GONE = "the job is gone (its user was erased)"


def _stale(settings: Settings) -> timedelta:
    return timedelta(seconds=settings.stuck_after_s)


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    raw = getattr(exc, "raw", "")
    if raw:
        text += f"\n--- raw answer ---\n{raw[:2000]}"
    return text


def _release(url: str, job_id: str, held_since: datetime | None, now: datetime) -> None:
    """The claim an earlier run of this stage lost the database with, back to queued."""
    if held_since is None:
        return
    try:
        one_statement(
            url, lambda session: jobs.release(session, job_id, held_since=held_since, now=now)
        )
    except OperationalError as exc:  # still away: the old claim is still the one held
        raise DatabaseLost(job_id, held_since) from exc


def run_extract(
    job_id: str, settings: Settings, *, held_since: datetime | None = None
) -> StageOutcome:
    """The extract stage; `held_since`: the claim of an earlier run that lost the database
    (DatabaseLost), released first. Raises DatabaseLost when the database goes away."""
    url = settings.resolved_database_url
    now = utcnow()
    _release(url, job_id, held_since, now)
    try:
        outcome = _extract(job_id, settings, url, now)
        if outcome.next == "skipped" and held_since is not None:
            # the hand-over may have been written before the connection broke
            outcome = _handed_over_already(url, job_id) or outcome
        return outcome
    except OperationalError as exc:
        # A claim whose reply was lost may have been made too: `now` names it either way.
        raise DatabaseLost(job_id, now) from exc


def _handed_over_already(url: str, job_id: str) -> StageOutcome | None:
    with unit_of_work(url) as session:
        stage = jobs.running_stage(session, job_id)
    return StageOutcome("store") if stage == ("queued", "store") else None


def _extract(job_id: str, settings: Settings, url: str, now: datetime) -> StageOutcome:
    # The claim and the hand-over are one statement each (on PostgreSQL), so neither
    # needs a transaction of its own (db.one_statement).
    claimed = one_statement(
        url,
        lambda session: job_windows.claim_with_texts(
            session, job_id, now=now, stale_after=_stale(settings)
        ),
    )
    if claimed is None:
        return StageOutcome("skipped")
    job, messages = claimed
    attempts = job.attempts
    window = ExtractionWindow(
        conversation_id=job.conversation_id,
        user_id=job.user_id,
        messages=messages,
        new_from_seq=job.new_from_seq,
    )

    started = time.perf_counter()
    try:
        if settings.llm_model is None:
            extraction = extract_offline(
                window,
                max_memories=settings.max_memories_per_extraction,
                categories=settings.categories,
            )
            usage: tuple[str, int | None, int | None, float | None] = (
                OFFLINE_MODEL,
                None,
                None,
                None,
            )
        else:
            from memlane.workers.llm import call_extraction_llm

            result = call_extraction_llm(
                window,
                model=settings.llm_model,
                api_base=settings.llm_api_base,
                api_key=settings.llm_api_key.get_secret_value() if settings.llm_api_key else None,
                timeout_s=settings.llm_timeout_s,
                max_memories=settings.max_memories_per_extraction,
                categories=settings.categories,
            )
            extraction = result.extraction
            usage = (settings.llm_model, result.tokens_in, result.tokens_out, result.cost_usd)
    except TransientProviderError as exc:
        return _retry_or_fail(
            settings, job_id, exc, attempts, settings.llm_max_retries + 1, exc.retry_after
        )
    except ExtractionError as exc:
        return _retry_or_fail(settings, job_id, exc, attempts, MAX_INVALID_ANSWER_ATTEMPTS, None)
    except PermanentProviderError as exc:
        return _fail(settings, job_id, exc)
    except Exception as exc:  # recorded on the job, never lost; re-raised by nobody
        log.exception("extract job %s failed unexpectedly", job_id)
        return _fail(settings, job_id, exc)

    latency_ms = (time.perf_counter() - started) * 1000
    model, tokens_in, tokens_out, cost = usage
    extracted = extraction.model_dump(mode="json")

    def hand_over(session: Session) -> StageOutcome:
        handed_over = jobs.extracted(
            session,
            job_id,
            extraction=extracted,
            model=model,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost_usd=cost,
            latency_ms=round(latency_ms, 3),
            now=utcnow(),
        )
        if handed_over:
            return StageOutcome("store")
        if session.get(Job, job_id) is None:
            return StageOutcome("skipped", detail=GONE)
        return StageOutcome("skipped", detail="another worker finished this stage")

    return one_statement(url, hand_over)


def run_store(
    job_id: str, settings: Settings, *, held_since: datetime | None = None
) -> StageOutcome:
    """The store stage; `held_since` as for run_extract. Raises DatabaseLost when the
    database goes away."""
    url = settings.resolved_database_url
    now = utcnow()
    _release(url, job_id, held_since, now)
    try:
        return _store(job_id, settings, url, now)
    except OperationalError as exc:
        raise DatabaseLost(job_id, now) from exc


DROPPED = (
    "nothing to store: the job keeps no extraction (dropped when it was done, or with its "
    "messages' text by MEMLANE_MESSAGE_RETENTION_DAYS); retry it to extract again"
)


def _store(job_id: str, settings: Settings, url: str, now: datetime) -> StageOutcome:
    with unit_of_work(url) as session:
        claimed = job_windows.claim_with_times(
            session, job_id, now=now, stale_after=_stale(settings)
        )
        if claimed is None:
            return StageOutcome("skipped")
        job, stated_at = claimed
        kept = job.extraction
        attempts = job.attempts
        user_id, conversation_id = job.user_id, job.conversation_id
        agent_id = scopes.conversation_agent(session, conversation_id)
        new_from, window_end = job.new_from_seq, job.window_end_seq
    if not kept:  # a store stage with nothing to store (jobs.retry sends it to extract)
        return _fail(settings, job_id, MemlaneError(DROPPED))
    extraction = Extraction.model_validate(kept)

    try:
        sightings = [
            dedup.Sighting.of(
                memory, conversation_id=conversation_id, new_from_seq=new_from, end_seq=window_end
            )
            for memory in extraction.memories
        ]
        # Embeddings are computed in one batch before the lock is taken, so a slow
        # embedding API never holds up the user's other writers.
        embedder = get_embedder(settings)
        *vectors, episode_vector = embedder.embed(
            [*(s.memory.content for s in sightings), extraction.episode.summary]
        )
        now = utcnow()
        with unit_of_work(url) as session:
            memories.user_lock(session, user_id)
            current = jobs.running_stage(session, job_id)
            if current is None:
                return StageOutcome("skipped", detail=GONE)
            if current != ("running", "store"):
                return StageOutcome("skipped", detail="another worker finished this stage")
            known = dedup_reads.candidates(
                session,
                user_id,
                [(s.memory.content, s.keywords) for s in sightings],
                threshold=settings.dedup_threshold,
                min_keywords=settings.dedup_min_keywords,
                agent_id=agent_id,
            )
            secret, prints = fingerprints.read(session, user_id)
            kept_out = set(
                suppressed_indices(
                    [(s.memory.content, s.keywords) for s in sightings],
                    known,
                    secret,
                    prints,
                    threshold=settings.dedup_threshold,
                    min_keywords=settings.dedup_min_keywords,
                )
            )
            episode = extraction.episode
            if kept_out:  # purged facts said again: not stored (pipeline/dedup/fingerprints.py)
                said_again = [s.keywords for i, s in enumerate(sightings) if i in kept_out]
                redacted = scrub.redact_said_again(session, user_id, episode, said_again)
                if redacted is not None:  # nor summarised
                    episode = redacted
                    [episode_vector] = embedder.embed([episode.summary])
                sightings = [s for i, s in enumerate(sightings) if i not in kept_out]
                vectors = [v for i, v in enumerate(vectors) if i not in kept_out]
            owners = [memory_scope(s.memory, agent_id) for s in sightings]
            plan = dedup.plan(
                sightings,
                known,
                now=now,
                stated_at=stated_at,
                threshold=settings.dedup_threshold,
                min_keywords=settings.dedup_min_keywords,
            )
            # the memories' refs, the episode's after them, and the change number: one
            # statement on the user's counter row
            first_ref, _ = changes.stamp_with_refs(session, user_id, len(plan.inserts) + 1)
            inserted = memories.apply_plan(
                session,
                plan,
                user_id=user_id,
                job_id=job_id,
                conversation_id=conversation_id,
                vectors=vectors,
                embedding_model=embedder.name,
                now=now,
                stated_at=stated_at,
                first_ref=first_ref,
                agents=[insert_scope(owners, p.sighting_indices) for p in plan.inserts],
            )
            confirmed = [(b.memory_id, b.sighting_indices) for b in plan.bumps] + [
                (r.memory_id, r.sighting_indices) for r in plan.rereads
            ]
            by_id = {m.id: m for m in known}
            shared = [by_id[i] for i in promoted(confirmed, by_id, owners)]
            scopes.share(session, user_id, shared, job_id=job_id, now=now)
            memories.promote_to_verified(
                session,
                user_id,
                tiers.promotions(
                    [(b.memory_id, b.increment, b.importance, b.confidence) for b in plan.bumps],
                    {m.id: m for m in known},
                ),
                now=now,
            )
            episode_id = context_items.save_episode(
                session,
                user_id=user_id,
                conversation_id=conversation_id,
                job_id=job_id,
                episode=episode,
                created_at=min(now, stated_at.get(window_end, now)),
                embedding=episode_vector,
                embedding_model=embedder.name,
                ref=first_ref + len(plan.inserts),
                agent_id=agent_id,
            )
            metadata_writes.inherit(
                session,
                user_id=user_id,
                conversation_id=conversation_id,
                inserted=inserted,
                confirmed=[b.memory_id for b in plan.bumps],
                episode_id=episode_id,
            )
            suppressed = len(kept_out) + sum(len(f.sighting_indices) for f in plan.forgotten)
            jobs.done(session, job_id, now=now, suppressed=suppressed)
    except TransientProviderError as exc:  # the embedding API
        return _retry_or_fail(
            settings, job_id, exc, attempts, settings.llm_max_retries + 1, exc.retry_after
        )
    except OperationalError:
        raise  # the database went away: not the job's failure (run_store)
    except Exception as exc:
        log.exception("store job %s failed", job_id)
        return _fail(settings, job_id, exc)
    index_if_large(settings, user_id, embedder.name, embedder.capabilities)
    return StageOutcome("done")


def _retry_or_fail(
    settings: Settings,
    job_id: str,
    exc: MemlaneError,
    attempts: int,
    max_attempts: int,
    retry_after: float | None,
) -> StageOutcome:
    if attempts >= max_attempts:
        return _fail(settings, job_id, exc, suffix=f" (after {attempts} attempts)")
    delay = compute_backoff(attempts, jitter=random.random(), retry_after=retry_after)
    with unit_of_work(settings.resolved_database_url) as session:
        job = session.get(Job, job_id)
        if job is None:
            return StageOutcome("skipped", detail=GONE)
        jobs.requeue(session, job, error=_describe(exc), now=utcnow())
    log.warning("job %s attempt %d failed (%s); retrying in %.1fs", job_id, attempts, exc, delay)
    return StageOutcome("retry", retry_in=delay, detail=str(exc))


def _fail(settings: Settings, job_id: str, exc: BaseException, *, suffix: str = "") -> StageOutcome:
    with unit_of_work(settings.resolved_database_url) as session:
        jobs.fail(session, job_id, error=_describe(exc) + suffix, now=utcnow())
    log.error("job %s failed: %s%s", job_id, exc, suffix)
    return StageOutcome("failed", detail=str(exc))
