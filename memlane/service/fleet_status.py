"""Is anything working the queues? For each Celery queue, how many workers consuming it
answered a broadcast within a short timeout, and how many messages wait on the broker;
`ok` when the broker answers and every queue has a worker, else `degraded` with the
reasons. Separate from readiness: a deploy with no workers still assembles contexts,
so it must be visible without taking the API out of rotation.

A check costs up to INSPECT_TIMEOUT_S (the broadcast waits that long for replies), so a
StatusCache answers from its last check for CACHE_S seconds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from memlane.config.queues import Queue
from memlane.config.settings import Settings
from memlane.models.schemas import FleetStatus, QueueStatus
from memlane.service.readiness import check_broker

log = logging.getLogger("memlane.fleet_status")

INSPECT_TIMEOUT_S = 1.0
CACHE_S = 5.0
# kombu's Redis transport keeps a queue's messages of priority p > 0 in a list of its own
# named queue + "\x06\x16" + p (Celery's default priority steps 0, 3, 6, 9).
_PRIORITY_SUFFIXES = ("", "\x06\x163", "\x06\x166", "\x06\x169")


def fleet_status(settings: Settings, *, timeout_s: float = INSPECT_TIMEOUT_S) -> FleetStatus:
    """Check the broker, the workers of each queue and the queues' depths now."""
    now = datetime.now(UTC)
    names = [queue.value for queue in Queue]
    if settings.broker_url is None:
        # The embedded default: jobs run on a thread of the process that enqueued them.
        return FleetStatus(
            status="ok",
            mode="embedded",
            broker="none (MEMLANE_BROKER_URL unset)",
            queues=[QueueStatus(name="in-process", workers=None, depth=None)],
            problems=[],
            checked_at=now,
        )
    broker = check_broker(settings.broker_url, timeout_s=timeout_s)
    if broker != "ok":
        queues = [QueueStatus(name=name, workers=None, depth=None) for name in names]
        problems = [f"broker {broker}: no job can be published or run"]
        return FleetStatus(
            status="degraded",
            mode="broker",
            broker=broker,
            queues=queues,
            problems=problems,
            checked_at=now,
        )
    consumers = _consumers(settings, timeout_s)
    depths = _depths(settings.broker_url, names)
    queues = [
        QueueStatus(name=name, workers=consumers.get(name, 0), depth=depths.get(name))
        for name in names
    ]
    problems = [
        f"no worker answered for queue {q.name} within {timeout_s:g} s"
        + (f" ({q.depth} message(s) waiting)" if q.depth else "")
        for q in queues
        if not q.workers
    ]
    return FleetStatus(
        status="degraded" if problems else "ok",
        mode="broker",
        broker=broker,
        queues=queues,
        problems=problems,
        checked_at=now,
    )


def _consumers(settings: Settings, timeout_s: float) -> dict[str, int]:
    """Workers per queue, from the replies to an `active_queues` broadcast."""
    from memlane.workers.app import configure_app

    app = configure_app(settings)
    try:
        replies: dict[str, list[dict[str, Any]]] | None = app.control.inspect(
            timeout=timeout_s
        ).active_queues()
    except Exception as exc:  # the broker went away between the ping and the broadcast
        log.warning("status: the workers' broadcast failed: %s", exc)
        return {}
    counts: dict[str, int] = {}
    for queues in (replies or {}).values():
        for name in {str(queue.get("name")) for queue in queues or []}:
            counts[name] = counts.get(name, 0) + 1
    return counts


def _depths(broker_url: str, names: list[str]) -> dict[str, int]:
    """Messages waiting in each queue; known for a Redis broker only."""
    if not broker_url.startswith(("redis://", "rediss://", "unix://")):
        return {}
    import redis

    client = redis.Redis.from_url(broker_url, socket_connect_timeout=1, socket_timeout=1)
    try:
        pipe = client.pipeline(transaction=False)
        for name in names:
            for suffix in _PRIORITY_SUFFIXES:
                pipe.llen(name + suffix)
        lengths = pipe.execute()
    except Exception as exc:
        log.warning("status: queue depths unreadable: %s", exc)
        return {}
    finally:
        client.close()
    step = len(_PRIORITY_SUFFIXES)
    return {name: sum(lengths[i * step : (i + 1) * step]) for i, name in enumerate(names)}


class StatusCache:
    """The last check, kept CACHE_S seconds; one check at a time (callers wait for it)."""

    def __init__(
        self,
        check: Callable[[], FleetStatus],
        *,
        ttl_s: float = CACHE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._check, self._ttl_s, self._clock = check, ttl_s, clock
        self._lock = threading.Lock()
        self._last: tuple[float, FleetStatus] | None = None

    def get(self) -> FleetStatus:
        with self._lock:
            if self._last is None or self._clock() - self._last[0] >= self._ttl_s:
                self._last = (self._clock(), self._check())
            return self._last[1]
