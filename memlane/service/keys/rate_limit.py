"""Requests per second per key, with a burst: the generic cell rate algorithm (GCRA), one
Redis key per API key holding the time its bucket is next empty, updated by one Lua
script so every API process sharing the Redis counts against the same budget. The clock
is Redis's own (TIME), so processes on machines whose clocks disagree still agree.

A key may send `burst` requests at once, then one each 1/rate seconds; a refused request
is told how long until the next would pass (the 429's Retry-After). With no Redis
configured the buckets live in the process (each API process then allows the full rate).
If Redis cannot be reached the request is let through and a warning logged (at most once
a minute): a limiter outage must not take the API down with it.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from typing import Any

from memlane.service.keys.reach import KeyGrant

log = logging.getLogger("memlane.api.rate_limit")

# KEYS[1]: the bucket; ARGV[1]: ms between requests; ARGV[2]: burst. Returns 0 when the
# request passes, else the ms until one would.
GCRA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local interval = tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local wait = tat + interval - interval * tonumber(ARGV[2]) - now
if wait > 0 then return math.ceil(wait) end
redis.call('SET', KEYS[1], tostring(tat + interval), 'PX', math.ceil(tat + interval - now) + 1000)
return 0
"""
PREFIX = "memlane:rate:"


def bucket_of(grant: KeyGrant) -> str:
    return PREFIX + (grant.key_id or f"boot:{grant.name}")


def limit_of(grant: KeyGrant, *, rate_per_s: float, burst: int) -> tuple[float, int]:
    """The key's (rate, burst): its own where set, else the server's defaults."""
    return (
        grant.rate_per_s if grant.rate_per_s is not None else rate_per_s,
        grant.burst if grant.burst is not None else burst,
    )


def gcra_wait_ms(tat: float, now: float, *, interval: float, burst: int) -> float:
    """ms until a request at `now` passes a bucket next empty at `tat` (0: it passes)."""
    return max(0.0, max(tat, now) + interval - interval * burst - now)


class RateLimiter:
    """The server's limiter: `rate_per_s`/`burst` for keys without their own (rate 0:
    unlimited), counted in Redis at `redis_url` or, without one, in this process."""

    def __init__(self, redis_url: str | None, *, rate_per_s: float, burst: int) -> None:
        self.redis_url, self.rate_per_s, self.burst = redis_url, rate_per_s, burst
        self._client: Any = None
        self._script: Any = None
        self._local: dict[str, float] = {}
        self._lock = threading.Lock()
        self._warned_at = -math.inf

    async def wait_s(self, grant: KeyGrant) -> float:
        """0 when the key may make this request now, else the seconds until it may."""
        rate, burst = limit_of(grant, rate_per_s=self.rate_per_s, burst=self.burst)
        if rate <= 0:
            return 0.0
        interval = 1000.0 / rate
        bucket = bucket_of(grant)
        if self.redis_url is None:
            return self._local_wait(bucket, interval, burst) / 1000
        try:
            waited = await self._redis_script()(keys=[bucket], args=[interval, burst])
        except Exception as exc:  # redis down or unreachable: let the request through
            if time.monotonic() - self._warned_at > 60:
                self._warned_at = time.monotonic()
                log.warning("rate limits not applied: Redis unreachable (%s)", exc)
            return 0.0
        return int(waited) / 1000

    def _redis_script(self) -> Any:
        if self._script is None and self.redis_url is not None:
            import redis.asyncio as aioredis

            self._client = aioredis.Redis.from_url(
                self.redis_url, socket_timeout=1.0, socket_connect_timeout=1.0
            )
            self._script = self._client.register_script(GCRA)
        return self._script

    def _local_wait(self, bucket: str, interval: float, burst: int) -> float:
        with self._lock:
            now = time.monotonic() * 1000
            tat = self._local.get(bucket, 0.0)
            wait = gcra_wait_ms(tat, now, interval=interval, burst=burst)
            if wait == 0:
                self._local[bucket] = max(tat, now) + interval
            return wait

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client, self._script = None, None
