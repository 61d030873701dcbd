"""Jobs: a job read and retried, the sweep, and the fleet's status."""

from __future__ import annotations

from memlane.api.deps import Key, Lane, needs, reach, v1_router
from memlane.models.api_schemas import SweepOut
from memlane.models.schemas import FleetStatus, JobPublic

router = v1_router()


@router.get("/jobs/{job_id}", tags=["jobs"], dependencies=[needs("read")])
def get_job(job_id: str, lane: Lane, key: Key) -> JobPublic:
    """A job; it belongs to its user (404 to a key that does not reach them)."""
    job = lane.job(job_id)
    reach(key, job.user_id)
    return job


@router.post("/jobs/{job_id}/retry", status_code=202, tags=["jobs"], dependencies=[needs("write")])
def retry_job(job_id: str, lane: Lane, key: Key) -> JobPublic:
    """Re-queue a failed job, or a queued one untouched for MEMLANE_STUCK_AFTER_S (its
    message lost or never sent); 409 for any other."""
    reach(key, lane.job(job_id).user_id)
    return lane.retry_job(job_id)


@router.post("/jobs/sweep", status_code=202, tags=["jobs"], dependencies=[needs("admin")])
def sweep_jobs(lane: Lane) -> SweepOut:
    """Publish every queued job again (after the broker was down, say), release stuck
    ones, start idle conversations' tails and apply retention: beat's sweep, at once."""
    result = lane.sweep()
    return SweepOut(
        extract=result.extract,
        store=result.store,
        tails=result.tails,
        messages_purged=result.messages_purged,
        packs_deleted=result.packs_deleted,
    )


@router.get("/status", tags=["jobs"], dependencies=[needs("admin")])
def fleet_status(lane: Lane) -> FleetStatus:
    """Whether workers answer for each queue (1 s broadcast, cached ~5 s) and the
    queues' depths: `ok`, or `degraded` with the problems. Always 200: a fleet with no
    workers still serves contexts; /readyz is the gate."""
    return lane.status()
