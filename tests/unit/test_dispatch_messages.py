"""What a record_access message carries and how Flower shows it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memlane.workers.dispatch import access_argsrepr, access_times

T = datetime(2026, 3, 1, 12, tzinfo=UTC)


def test_one_moment_for_all_travels_as_one() -> None:
    assert access_times([T, T, T]) == T.isoformat()
    assert access_times(T) == T.isoformat()
    assert access_times([T, T + timedelta(seconds=1)]) == [
        T.isoformat(),
        (T + timedelta(seconds=1)).isoformat(),
    ]


def test_the_shown_arguments_name_the_first_id_and_count_the_rest() -> None:
    ids = [f"mem_{i}" for i in range(5000)]
    shown = access_argsrepr(ids, T.isoformat())
    assert shown == f"(['mem_0', …] 5000 memory ids, {T.isoformat()!r})"
    assert access_argsrepr(["mem_0"], ["a", "b"]) == "(['mem_0'] 1 memory id, 2 moments)"
    assert "mem_4999" not in shown
