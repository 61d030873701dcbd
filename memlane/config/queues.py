"""Celery queues and routes. A new queue touches this file and workers/."""

from __future__ import annotations

from enum import StrEnum


class Queue(StrEnum):
    INGEST = "ingest"  # cheap bookkeeping: record_access, the sweep
    EXTRACT = "extract"  # LLM-bound: run on a thread pool with high concurrency
    STORE = "store"  # dedup + insert under a per-user lock
    WEBHOOKS = "webhooks"  # signed HTTP deliveries: network-bound, run on threads


TASK_ROUTES: dict[str, dict[str, str]] = {
    "memlane.extract": {"queue": Queue.EXTRACT.value},
    "memlane.store": {"queue": Queue.STORE.value},
    "memlane.record_access": {"queue": Queue.INGEST.value},
    "memlane.sweep": {"queue": Queue.INGEST.value},
    "memlane.reembed_user": {"queue": Queue.STORE.value},
    "memlane.webhooks.dispatch": {"queue": Queue.WEBHOOKS.value},
    "memlane.webhooks.deliver": {"queue": Queue.WEBHOOKS.value},
}
