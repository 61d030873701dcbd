"""Sending webhook deliveries (tasks `memlane.webhooks.*` on the webhooks queue): claim
one, POST it signed, record what became of it. At least once: a delivery is settled only
after the receiver answered 2xx, so a sender that dies mid-send leaves it due again after
its lease; every send of one event carries the same event id, for the receiver to
drop repeats."""

from __future__ import annotations

import json
import logging
import random
import time
from dataclasses import dataclass
from datetime import timedelta
from importlib.metadata import version
from typing import Literal

import httpx

from memlane.config.settings import Settings
from memlane.models.db import unit_of_work
from memlane.models.store.webhooks import deliveries
from memlane.pipeline.backoff import compute_backoff, parse_retry_after
from memlane.pipeline.webhook_signature import HEADER, sign
from memlane.workers.runner import utcnow

log = logging.getLogger("memlane.webhooks")

# A send that fails with one of these may work later; any other answer is a refusal.
_RETRIED_STATUSES = frozenset({408, 425, 429})
_BATCH = 500


@dataclass(frozen=True, slots=True)
class SendOutcome:
    status: Literal["delivered", "retry", "dead", "skipped"]
    attempts: int = 0  # made so far, this one included
    retry_in: float = 0.0


def _lease(settings: Settings) -> timedelta:
    """How long a published or claimed delivery waits before it is due again: longer
    than a send can take."""
    return timedelta(seconds=settings.webhook_timeout_s + 30)


def publish_due(settings: Settings) -> list[tuple[int, int]]:
    """The deliveries due now, as (id, attempts): beat's tick publishes one task each."""
    with unit_of_work(settings.resolved_database_url) as session:
        return deliveries.publish_due(session, now=utcnow(), lease=_lease(settings), limit=_BATCH)


def deliver(delivery_id: int, attempts: int, settings: Settings) -> SendOutcome:
    """One send of one delivery, if `attempts` (its token) still holds; what to do next."""
    with unit_of_work(settings.resolved_database_url) as session:
        claimed = deliveries.claim(
            session, delivery_id, attempts=attempts, now=utcnow(), lease=_lease(settings)
        )
    if claimed is None:  # sent by another message, settled, or gone with its user
        return SendOutcome("skipped")
    attempts = claimed.attempts
    body = json.dumps(claimed.body, separators=(",", ":"), sort_keys=True).encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": f"memlane-webhooks/{version('memlane')}",
        "Memlane-Event-Id": str(claimed.body["id"]),
        "Memlane-Event-Type": str(claimed.body["type"]),
        HEADER: sign(body, secret=claimed.secret, timestamp=int(time.time())),
    }
    status_code: int | None = None
    retry_after: float | None = None
    try:
        response = httpx.post(
            claimed.url, content=body, headers=headers, timeout=settings.webhook_timeout_s
        )
    except httpx.TransportError as exc:  # timeouts, refused connections, DNS
        error = f"{type(exc).__name__}: {exc}"
        retryable = True
    else:
        status_code = response.status_code
        if response.is_success:
            with unit_of_work(settings.resolved_database_url) as session:
                deliveries.delivered(session, delivery_id, status_code=status_code, now=utcnow())
            return SendOutcome("delivered", attempts=attempts)
        error = f"HTTP {status_code}: {response.text[:200]}"
        retryable = status_code >= 500 or status_code in _RETRIED_STATUSES
        retry_after = parse_retry_after(response.headers.get("Retry-After"), now=utcnow())
    delay: float | None = None
    if retryable and attempts < settings.webhook_max_attempts:
        delay = compute_backoff(
            attempts - 1,
            base=settings.webhook_backoff_s,
            max_backoff=settings.webhook_max_backoff_s,
            jitter=random.random(),
            retry_after=retry_after,
        )
    with unit_of_work(settings.resolved_database_url) as session:
        deliveries.failed(
            session,
            delivery_id,
            error=error,
            status_code=status_code,
            retry_at=None if delay is None else utcnow() + timedelta(seconds=delay),
        )
    if delay is None:
        log.warning(
            "webhook delivery %s dead after %d attempt(s): %s", delivery_id, attempts, error
        )
        return SendOutcome("dead", attempts=attempts)
    log.info(
        "webhook delivery %s attempt %d failed (%s); again in %.1fs",
        delivery_id,
        attempts,
        error,
        delay,
    )
    return SendOutcome("retry", attempts=attempts, retry_in=delay)
