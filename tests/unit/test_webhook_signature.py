"""Webhook signatures (memlane.pipeline.webhook_signature): pure, the clock an argument."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from memlane.pipeline.webhook_signature import SignatureError, sign, verify

BODY = b'{"id":"evt_1","type":"job.done"}'
SECRET = "s3cret"
T = 1_800_000_000


def test_the_signature_is_the_hmac_of_the_timestamp_and_the_body() -> None:
    expected = hmac.new(SECRET.encode(), b"1800000000." + BODY, hashlib.sha256).hexdigest()
    assert sign(BODY, secret=SECRET, timestamp=T) == f"t={T},v1={expected}"


def test_a_fresh_signature_verifies_and_gives_its_timestamp() -> None:
    header = sign(BODY, secret=SECRET, timestamp=T)
    assert verify(BODY, header, secret=SECRET, now=T + 299) == T
    assert verify(BODY, header, secret=SECRET, now=T - 10) == T  # the sender's clock ahead


@pytest.mark.parametrize(
    ("body", "secret", "now", "why"),
    [
        (BODY + b" ", SECRET, T, "does not match"),  # the body changed
        (BODY, "other", T, "does not match"),  # another subscription's secret
        (BODY, SECRET, T + 301, "outside the 300 s replay window"),  # replayed later
    ],
)
def test_a_changed_body_another_secret_or_a_replay_is_refused(
    body: bytes, secret: str, now: float, why: str
) -> None:
    with pytest.raises(SignatureError, match=why):
        verify(body, sign(BODY, secret=SECRET, timestamp=T), secret=secret, now=now)


def test_the_window_is_the_receivers_choice() -> None:
    header = sign(BODY, secret=SECRET, timestamp=T)
    assert verify(BODY, header, secret=SECRET, now=T + 3000, tolerance_s=3600) == T
    with pytest.raises(SignatureError, match="60 s replay window"):
        verify(BODY, header, secret=SECRET, now=T + 61, tolerance_s=60)


@pytest.mark.parametrize(
    ("header", "why"),
    [
        (None, "no Memlane-Signature header"),
        ("", "no Memlane-Signature header"),
        ("v1=abc", "no t="),
        ("t=soon,v1=abc", "no t="),
        (f"t={T}", "does not match"),
        (f"t={T},v1=", "does not match"),
    ],
)
def test_a_missing_or_malformed_header_says_what_is_wrong(header: str | None, why: str) -> None:
    with pytest.raises(SignatureError, match=why):
        verify(BODY, header, secret=SECRET, now=T)


def test_any_of_several_signatures_may_hold_during_a_secret_rotation() -> None:
    good = sign(BODY, secret=SECRET, timestamp=T).split(",")[1]
    assert verify(BODY, f"t={T},v1=00ff,{good}", secret=SECRET, now=T) == T
