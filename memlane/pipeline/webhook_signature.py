"""Webhook signatures: HMAC-SHA256 over the timestamp and the body, Stripe's scheme.

    Memlane-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>

The timestamp is signed with the body, so a receiver that refuses signatures older than
its replay window (`tolerance_s`, 300 s by default) refuses a captured request replayed
later; within the window, the event id (every delivery of one event carries the same)
is what tells a retry from a new event. Pure: the clock comes in as an argument.
"""

from __future__ import annotations

import hashlib
import hmac

HEADER = "Memlane-Signature"
DEFAULT_TOLERANCE_S = 300.0


class SignatureError(ValueError):
    """A webhook request whose signature is missing, malformed, wrong or too old."""


def sign(body: bytes, *, secret: str, timestamp: int) -> str:
    """The signature header's value for `body` sent at `timestamp` (unix seconds)."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={digest.hexdigest()}"


def verify(
    body: bytes,
    header: str | None,
    *,
    secret: str,
    now: float,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
) -> int:
    """Check the signature header of a received `body` (the raw bytes, before any JSON
    parsing); its timestamp when it holds, else SignatureError saying why. `now`: the
    receiver's clock, unix seconds."""
    if not header:
        raise SignatureError(f"no {HEADER} header")
    fields: dict[str, list[str]] = {}
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        fields.setdefault(key, []).append(value)
    try:
        timestamp = int(fields["t"][0])
    except (KeyError, ValueError):
        raise SignatureError(f"{HEADER} has no t=<unix seconds>") from None
    expected = sign(body, secret=secret, timestamp=timestamp).split("v1=", 1)[1]
    if not any(hmac.compare_digest(expected, given) for given in fields.get("v1", [])):
        raise SignatureError("the signature does not match the body and the secret")
    if abs(now - timestamp) > tolerance_s:
        raise SignatureError(
            f"signed {now - timestamp:.0f} s ago, outside the {tolerance_s:g} s replay window"
        )
    return timestamp
