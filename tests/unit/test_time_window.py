"""The time a query names (pipeline.ranking.time_window) and how it weighs relevance."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import numpy as np
import pytest

from memlane.pipeline.ranking.time_window import (
    OUTSIDE_WINDOW_FACTOR,
    TimeWindow,
    in_window_factor,
    time_window,
    weigh_items,
)
from memlane.pipeline.records import MemoryRecord

NOW = datetime(2024, 2, 10, 15, 0, tzinfo=UTC)


def days(query: str, now: datetime = NOW) -> tuple[date, date] | None:
    window = time_window(query, now)
    return None if window is None else (window.start.date(), window.end.date())


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("What did she eat on October 24, 2023?", date(2023, 10, 24), date(2023, 10, 25)),
        ("What did she eat on Oct 24 2023?", date(2023, 10, 24), date(2023, 10, 25)),
        ("what happened on 24 October, 2023", date(2023, 10, 24), date(2023, 10, 25)),
        ("a book finished on 8th December, 2023", date(2023, 12, 8), date(2023, 12, 9)),
        ("the picture shared on December 1,2023", date(2023, 12, 1), date(2023, 12, 2)),
        ("plans for 2023-10-24", date(2023, 10, 24), date(2023, 10, 25)),
        ("the workout class in December 2023", date(2023, 12, 1), date(2024, 1, 1)),
        ("how many times in 2023", date(2023, 1, 1), date(2024, 1, 1)),
    ],
)
def test_written_dates_name_their_day_month_or_year(query: str, start: date, end: date) -> None:
    assert days(query) == (start, end)


def test_a_date_without_a_year_is_the_latest_one_not_after_now() -> None:
    # Feb 10, 2024: Oct 24 was in 2023, Feb 3 this year, "in May" last year's May
    assert days("on Oct 24") == (date(2023, 10, 24), date(2023, 10, 25))
    assert days("on Feb 3") == (date(2024, 2, 3), date(2024, 2, 4))
    assert days("what did we say in May?") == (date(2023, 5, 1), date(2023, 6, 1))
    assert days("the deal in February") == (date(2024, 2, 1), date(2024, 3, 1))


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("yesterday", date(2024, 2, 9), date(2024, 2, 10)),
        ("what did I say last month", date(2024, 1, 1), date(2024, 2, 1)),
        ("a trip last year", date(2023, 1, 1), date(2024, 1, 1)),
        ("this year so far", date(2024, 1, 1), date(2025, 1, 1)),
        ("two weeks ago", date(2024, 1, 20), date(2024, 2, 4)),
        ("3 days ago", date(2024, 2, 6), date(2024, 2, 9)),
    ],
)
def test_relative_phrases_are_read_against_now(query: str, start: date, end: date) -> None:
    assert days(query) == (start, end)


def test_spans_anchored_on_a_date() -> None:
    assert days("What did John do the week before August 3, 2023?") == (
        date(2023, 7, 27),
        date(2023, 8, 4),
    )
    assert days("the puppy she got two weeks before August 11, 2023") == (
        date(2023, 7, 28),
        date(2023, 8, 12),
    )
    assert days("Where was John between August 11 and August 15 2023?") == (
        date(2023, 8, 11),
        date(2023, 8, 16),
    )


def test_a_relative_phrase_is_read_against_the_date_the_query_names() -> None:
    # "last week, as mentioned on 6 November": the weeks before 6 November, not before now
    window = days("What was his writing issue last week, as mentioned on November 6, 2023?")
    assert window == (date(2023, 10, 23), date(2023, 11, 7))


@pytest.mark.parametrize(
    "query",
    [
        "What does Maya like?",
        "You may want to call her",
        "Which team did he sign with?",
        "He scored 2023 points",
        "Juneau is cold",
        "",
    ],
)
def test_no_time_named_no_window(query: str) -> None:
    assert time_window(query, NOW) is None


def test_a_date_that_does_not_exist_names_no_window() -> None:
    assert time_window("on February 30, 2023", NOW) is None


def test_the_window_is_read_in_the_users_timezone() -> None:
    # 01:00 UTC on Feb 10 is still Feb 9 in New York: "yesterday" is Feb 8 there
    early = datetime(2024, 2, 10, 1, 0, tzinfo=UTC)
    new_york = timezone(timedelta(hours=-5))
    window = time_window("yesterday", early, new_york)
    assert window is not None
    assert window.start == datetime(2024, 2, 8, 5, 0, tzinfo=UTC)
    assert window.end == datetime(2024, 2, 9, 5, 0, tzinfo=UTC)
    assert window.phrase == "yesterday"


def test_rows_outside_the_window_keep_a_share_of_their_relevance() -> None:
    window = TimeWindow(datetime(2023, 5, 1, tzinfo=UTC), datetime(2023, 6, 1, tzinfo=UTC), "May")
    created = np.array(
        [
            datetime(2023, 5, 3, tzinfo=UTC).timestamp(),  # in
            datetime(2023, 4, 30, tzinfo=UTC).timestamp(),  # out
            datetime(2023, 1, 1, tzinfo=UTC).timestamp(),  # created out, confirmed in
        ]
    )
    stated = created.copy()
    stated[2] = datetime(2023, 5, 31, 23, tzinfo=UTC).timestamp()
    live = np.ones(3, dtype=np.bool_)
    factor = in_window_factor(window, created, stated, live)
    assert factor is not None
    assert factor.tolist() == [1.0, OUTSIDE_WINDOW_FACTOR, 1.0]
    # a window no live row lies in says nothing about this store
    assert in_window_factor(window, created, stated, np.array([False, True, False])) is None
    assert in_window_factor(None, created, stated, live) is None


def test_items_outside_the_window_keep_a_share_of_their_relevance() -> None:
    def memory(memory_id: str, said: datetime) -> MemoryRecord:
        return MemoryRecord(
            id=memory_id,
            user_id="u",
            content="x",
            category="fact",
            importance=0.5,
            confidence=1.0,
            created_at=said,
            accessed_at=said,
        )

    window = time_window("in May 2023", NOW)
    items = [
        memory("a", datetime(2023, 5, 2, tzinfo=UTC)),
        memory("b", datetime(2023, 7, 1, tzinfo=UTC)),
    ]
    weighed = weigh_items({"a": 0.6, "b": 0.8}, window, items)
    assert weighed == {"a": 0.6, "b": 0.8 * OUTSIDE_WINDOW_FACTOR}
    assert weigh_items({"b": 0.8}, window, items[1:]) == {"b": 0.8}
