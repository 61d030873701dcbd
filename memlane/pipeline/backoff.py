"""How long to wait before retrying a failed call. Pure: the jitter and the clock come in
as arguments, so every delay can be checked by hand.
"""

from __future__ import annotations

import math
from datetime import datetime
from email.utils import parsedate_to_datetime


def compute_backoff(
    attempt: int,
    *,
    base: float = 1.0,
    factor: float = 2.0,
    max_backoff: float = 60.0,
    jitter: float,
    retry_after: float | None,
) -> float:
    """Seconds to wait before retry number `attempt + 1` (`attempt` = retries already made,
    0 before the first retry, as Celery's `request.retries` counts).

        capped  = min(max_backoff, base · factor^attempt)
        delay   = capped · (0.5 + 0.5 · jitter)          jitter ∈ [0, 1)
        result  = max(delay, retry_after)                 when the server sent Retry-After

    "Equal jitter": the delay lies in [capped/2, capped), so workers that failed together
    spread out yet still back off exponentially. `retry_after` is a floor because the server
    said when it can take the call again; it may exceed `max_backoff`, which bounds only our
    own schedule.

    Hand-checked with the defaults: attempt 0 → 0.5 s (jitter 0) … 1 s; attempt 3 → 4 s
    (jitter 0); attempt 10 → 30 s (jitter 0), capped at 60 s.
    """
    if attempt < 0:
        raise ValueError(f"attempt must be >= 0, got {attempt}")
    if not 0.0 <= jitter < 1.0:
        raise ValueError(f"jitter must be in [0, 1), got {jitter}")
    if base <= 0 or factor < 1 or max_backoff <= 0:
        raise ValueError("base and max_backoff must be > 0 and factor >= 1")
    # Compare exponents rather than computing factor^attempt, which overflows a float
    # long before a retry count would stop being plausible.
    if factor == 1.0 or attempt * math.log(factor) < math.log(max_backoff / base):
        capped = min(max_backoff, base * factor**attempt)
    else:
        capped = max_backoff
    delay = capped * (0.5 + 0.5 * jitter)
    if retry_after is not None and retry_after > delay:
        return float(retry_after)
    return delay


def parse_retry_after(value: str | None, *, now: datetime) -> float | None:
    """A Retry-After header value in seconds: either delta-seconds ("120", "1.5") or an
    HTTP date, taken relative to `now` (which must be timezone-aware). Negative or past
    values give 0.0; anything unreadable gives None (the caller falls back to backoff)."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        seconds = (when - now).total_seconds()
    if math.isnan(seconds) or math.isinf(seconds):
        return None
    return max(0.0, seconds)
