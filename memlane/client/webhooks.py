"""Checking a webhook delivery on the receiving side (docs/webhooks.md):

from memlane.client.webhooks import verify, SignatureError

event = verify(request_body, request.headers.get("Memlane-Signature"), secret=SECRET)
if seen(event["id"]):      # at least once: a retry repeats the event id
    return 200
"""

from __future__ import annotations

import json
import time
from typing import Any

from memlane.pipeline.webhook_signature import (
    DEFAULT_TOLERANCE_S,
    HEADER,
    SignatureError,
)
from memlane.pipeline.webhook_signature import verify as verify_signature

__all__ = ["DEFAULT_TOLERANCE_S", "HEADER", "SignatureError", "verify"]


def verify(
    body: bytes,
    header: str | None,
    *,
    secret: str,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
    now: float | None = None,
) -> dict[str, Any]:
    """The event of a delivery whose signature holds (`body`: the raw bytes received),
    else SignatureError: missing, malformed, not the secret's, or older than
    `tolerance_s` (the replay window, 300 s by default)."""
    verify_signature(
        body,
        header,
        secret=secret,
        now=time.time() if now is None else now,
        tolerance_s=tolerance_s,
    )
    event: dict[str, Any] = json.loads(body)
    return event
