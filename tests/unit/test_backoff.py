from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memlane.pipeline.backoff import compute_backoff, parse_retry_after

NOW = datetime(2026, 1, 15, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("attempt", "jitter", "expected"),
    [
        (0, 0.0, 0.5),  # 1 s capped, equal jitter at its low end: half of it
        (0, 0.5, 0.75),  # 1 · (0.5 + 0.25)
        (1, 0.0, 1.0),  # 2 s → 1 s
        (3, 0.0, 4.0),  # 8 s → 4 s
        (3, 0.5, 6.0),  # 8 · 0.75
        (5, 0.0, 16.0),  # 32 s → 16 s
        (6, 0.0, 30.0),  # 64 s capped at 60 → 30 s
        (10, 0.5, 45.0),  # 1024 s capped at 60 → 60 · 0.75
    ],
)
def test_backoff_doubles_from_one_second_with_equal_jitter(
    attempt: int, jitter: float, expected: float
) -> None:
    assert compute_backoff(attempt, jitter=jitter, retry_after=None) == pytest.approx(expected)


def test_base_factor_and_cap_are_honoured() -> None:
    # 0.25 · 3^2 = 2.25, jitter 0 → 1.125
    assert compute_backoff(2, base=0.25, factor=3.0, jitter=0.0, retry_after=None) == 1.125
    # 0.25 · 3^4 = 20.25, capped at 10 → 5
    assert (
        compute_backoff(4, base=0.25, factor=3.0, max_backoff=10.0, jitter=0.0, retry_after=None)
        == 5.0
    )


def test_retry_after_is_a_floor_not_a_replacement() -> None:
    # the server asks for 7 s; our schedule says 0.5 s → wait 7 s
    assert compute_backoff(0, jitter=0.0, retry_after=7.0) == 7.0
    # the server asks for 1 s; our schedule says 16 s → wait 16 s
    assert compute_backoff(5, jitter=0.0, retry_after=1.0) == 16.0
    # a server request beyond our own cap is still honoured
    assert compute_backoff(20, jitter=0.0, retry_after=120.0) == 120.0


def test_huge_attempt_counts_do_not_overflow() -> None:
    assert compute_backoff(10_000, jitter=0.0, retry_after=None) == 30.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"attempt": -1, "jitter": 0.0},
        {"attempt": 0, "jitter": 1.0},
        {"attempt": 0, "jitter": -0.1},
        {"attempt": 0, "jitter": 0.0, "base": 0.0},
        {"attempt": 0, "jitter": 0.0, "factor": 0.5},
    ],
)
def test_invalid_arguments_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        compute_backoff(retry_after=None, **kwargs)  # type: ignore[arg-type]


@given(
    attempt=st.integers(min_value=0, max_value=200),
    jitter=st.floats(min_value=0.0, max_value=0.999999),
    cap=st.floats(min_value=0.1, max_value=3600.0),
)
def test_delay_stays_within_half_cap_and_cap_and_grows_with_attempts(
    attempt: int, jitter: float, cap: float
) -> None:
    delay = compute_backoff(attempt, max_backoff=cap, jitter=jitter, retry_after=None)
    full = min(cap, 2.0**attempt)
    assert full / 2 <= delay <= full + 1e-9
    assert compute_backoff(attempt + 1, max_backoff=cap, jitter=jitter, retry_after=None) >= delay


@given(
    attempt=st.integers(min_value=0, max_value=50),
    retry_after=st.floats(min_value=0.0, max_value=10_000.0),
)
def test_never_earlier_than_the_server_asked(attempt: int, retry_after: float) -> None:
    assert compute_backoff(attempt, jitter=0.3, retry_after=retry_after) >= retry_after


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("3", 3.0),
        (" 1.5 ", 1.5),
        ("0", 0.0),
        ("-4", 0.0),
        ("Thu, 15 Jan 2026 12:00:30 GMT", 30.0),
        ("Thu, 15 Jan 2026 11:59:00 GMT", 0.0),  # already past
        ("soon", None),
        ("", None),
        (None, None),
        ("nan", None),
    ],
)
def test_retry_after_header_values(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, now=NOW) == expected
