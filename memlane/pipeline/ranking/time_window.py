"""The time a query names: "on Oct 24, 2023", "in May", "in 2023", "last month", "two
weeks ago", "the week before August 3", "between May 1 and May 5" → one window of time
[start, end), read against the assembly's `now` in the user's timezone (UTC when unknown).

Pure: `now` and the timezone come in. A query naming no time, or a time this parser does
not read, has no window (None). A query naming several is read in this order: a span
anchored on a date, a relative phrase (against the date the query names, if any), the
first written date, a year (`time_window`). A date without a year is the latest such
date not after `now`; one with a year is read as written, after `now` or not. The
service reads windows in UTC: memlane keeps no timezone per user yet.

What the assembler does with a window (`in_window_factor`): an item stated in it keeps its
relevance, an item stated outside it keeps OUTSIDE_WINDOW_FACTOR of it, when some item
lies in the window (otherwise the window says nothing about this store and nothing
changes). The question carries two constraints, its words and its time; an item that
meets only the words meets half of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo

import numpy as np
import numpy.typing as npt

from memlane.pipeline.records import EpisodeRecord, MemoryRecord, Procedure

# What an item stated outside a query's window keeps of its relevance (module docstring).
OUTSIDE_WINDOW_FACTOR = 0.5

_MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sept", "sep"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
_MONTH = r"(?P<{name}>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\b\.?"
_DAY = r"(?P<{name}>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<{name}>(?:19|20)\d\d)"
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "couple of": 2,
    "few": 3,
}
_UNITS = {"day": 1, "week": 7, "weekend": 3, "month": 30, "year": 365}


def _date_pattern(suffix: str) -> str:
    """A written date, its parts named with `suffix`: "Oct 24, 2023", "24 October 2023",
    "24th of October, 2023", "October 24", "October 2023", "2023-10-24"."""
    m, d, y = (
        _MONTH.format(name=f"m{suffix}"),
        _DAY.format(name=f"d{suffix}"),
        _YEAR.format(name=f"y{suffix}"),
    )
    d2, m2, y2, y3 = (
        _DAY.format(name=f"e{suffix}"),
        _MONTH.format(name=f"n{suffix}"),
        _YEAR.format(name=f"z{suffix}"),
        _YEAR.format(name=f"i{suffix}"),
    )
    return (
        rf"(?:(?P<iso{suffix}>{y3}-(?P<im{suffix}>[01]\d)-(?P<id{suffix}>[0-3]\d))"
        rf"|{d2}\s+(?:of\s+)?{m2}(?:,?\s*{y2})?"
        rf"|{m}(?:\s+{d}(?![\d:]))?(?:,?\s*{y})?)"
    )


_A = _date_pattern("a")
_B = _date_pattern("b")
_COUNT = r"(?P<count>\d+|" + "|".join(sorted(_NUMBERS, key=len, reverse=True)) + r")"
_UNIT = r"(?P<unit>day|week(?:end)?|month|year)s?"
_PATTERNS = [
    ("between", re.compile(rf"\bbetween\s+{_A}\s+and\s+{_B}", re.I)),
    (
        "before",
        re.compile(rf"\b(?:the|last|{_COUNT})?\s*{_UNIT}\s+(?:before|prior to)\s+{_A}", re.I),
    ),
    ("ago", re.compile(rf"\b{_COUNT}\s+{_UNIT}\s+ago\b", re.I)),
    (
        "last",
        re.compile(r"\b(?P<which>last|this|past)\s+(?P<unit>week(?:end)?|month|year)\b", re.I),
    ),
    ("day", re.compile(r"\b(?P<word>yesterday|today)\b", re.I)),
    ("date", re.compile(rf"\b{_A}", re.I)),
    ("year", re.compile(rf"\b(?:in|during|of|since|for)\s+{_YEAR.format(name='year')}\b", re.I)),
]

_BY_KIND = dict(_PATTERNS)


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """[start, end) in UTC, and the words of the query it was read from."""

    start: datetime
    end: datetime
    phrase: str

    def contains(self, moment: datetime) -> bool:
        return self.start <= moment < self.end


def time_window(query: str, now: datetime, tz: tzinfo | None = None) -> TimeWindow | None:
    """The window of time `query` names, read at `now` in `tz` (module docstring).

    A span anchored on a date ("the week before August 3", "between May 1 and 5") is
    read first; then a relative phrase ("last week", "two days ago"), against the date
    the query names when it names one ("last week, as mentioned on 6 November": the
    week before 6 November), else against `now`; then a written date, then a year."""
    zone = tz or UTC
    local_now = now.astimezone(zone) if now.tzinfo else now.replace(tzinfo=UTC).astimezone(zone)
    found = {kind: _first(pattern, kind, query, local_now.date()) for kind, pattern in _PATTERNS}
    for kind in ("between", "before"):
        anchored = found[kind]
        if anchored is not None:
            return _window(*anchored, zone)
    dated = found["date"]
    today = dated[1] - timedelta(days=1) if dated is not None else local_now.date()
    relative = [
        hit
        for kind in ("ago", "last", "day")
        if (hit := _first(_BY_KIND[kind], kind, query, today)) is not None
    ]
    if relative:
        return _window(*min(relative, key=lambda hit: hit[3]), zone)
    if dated is not None:
        return _window(*dated, zone)
    if found["year"] is not None:
        return _window(*found["year"], zone)
    return None


_Hit = tuple[date, date, str, int]  # the days [start, end), the phrase, where it begins


def _first(pattern: re.Pattern[str], kind: str, query: str, today: date) -> _Hit | None:
    """The first match of `pattern` in `query` that names real days."""
    for match in pattern.finditer(query):
        days = _read(kind, match, today)
        if days is not None:
            return days[0], days[1], match.group(0).strip(), match.start()
    return None


def _window(start: date, end: date, phrase: str, _at: int, zone: tzinfo) -> TimeWindow:
    def at(day: date) -> datetime:
        return datetime.combine(day, time(0), tzinfo=zone).astimezone(UTC)

    return TimeWindow(at(start), at(end), phrase)


def _read(kind: str, match: re.Match[str], today: date) -> tuple[date, date] | None:
    """The days [start, end) a matched phrase names, None when it names no real date."""
    if kind == "between":
        since, until = _span(match, "a", today), _span(match, "b", today)
        if since is None or until is None or until[1] <= since[0]:
            return None
        return since[0], until[1]
    if kind == "before":
        anchor = _span(match, "a", today)
        if anchor is None:
            return None
        days = _UNITS[match.group("unit").lower()] * _count(match.group("count"))
        return anchor[0] - timedelta(days=days), anchor[1]
    if kind == "ago":
        span = _UNITS[match.group("unit").lower()]
        middle = today - timedelta(days=span * _count(match.group("count")))
        return middle - timedelta(days=span), middle + timedelta(days=span + 1)
    if kind == "last":
        unit, which = match.group("unit").lower(), match.group("which").lower()
        if unit == "year":
            year = today.year - (which == "last")
            return date(year, 1, 1), date(year + 1, 1, 1)
        if unit == "month":
            first = today.replace(day=1)
            if which == "last":
                first = (first - timedelta(days=1)).replace(day=1)
            return first, _next_month(first)
        span = _UNITS[unit]
        if which == "this":
            return today - timedelta(days=span), today + timedelta(days=1)
        return today - timedelta(days=2 * span), today + timedelta(days=1)
    if kind == "day":
        day = today - timedelta(days=match.group("word").lower() == "yesterday")
        return day, day + timedelta(days=1)
    if kind == "date":
        return _span(match, "a", today)
    year = int(match.group("year"))
    return date(year, 1, 1), date(year + 1, 1, 1)


def _count(word: str | None) -> int:
    if not word:
        return 1
    word = word.lower()
    return int(word) if word.isdigit() else _NUMBERS.get(word, 1)


def _span(match: re.Match[str], suffix: str, today: date) -> tuple[date, date] | None:
    """The days a written date (`_date_pattern`) names: one day, or a month without a
    day; a date without a year is the latest such date not after `today`."""
    groups = match.groupdict()
    if groups.get(f"iso{suffix}"):
        return _day(
            int(groups[f"i{suffix}"]), int(groups[f"im{suffix}"]), int(groups[f"id{suffix}"])
        )
    if groups.get(f"n{suffix}"):
        month, day_text, year_text = (
            groups[f"n{suffix}"],
            groups[f"e{suffix}"],
            groups[f"z{suffix}"],
        )
    else:
        month, day_text, year_text = (
            groups[f"m{suffix}"],
            groups[f"d{suffix}"],
            groups[f"y{suffix}"],
        )
    number = _MONTHS[month.lower()]
    if day_text is None and year_text is None and month.lower() in ("may", "mar", "jun", "dec"):
        # "may" and short forms alone are as often words ("you may", "mar"): only with
        # "in" before them ("in May")
        before = match.string[: match.start()].rstrip().lower()
        if not before.endswith(("in", "during", "of", "since")):
            return None
    if year_text is None:
        year = today.year
        latest = date(year, number, 1)
        if latest > today:
            year -= 1
        if day_text is not None:
            found = _day(year, number, int(day_text))
            if found is not None and found[0] > today:
                found = _day(year - 1, number, int(day_text))
            return found
        return date(year, number, 1), _next_month(date(year, number, 1))
    year = int(year_text)
    if day_text is None:
        return date(year, number, 1), _next_month(date(year, number, 1))
    return _day(year, number, int(day_text))


def _day(year: int, month: int, day: int) -> tuple[date, date] | None:
    try:
        found = date(year, month, day)
    except ValueError:
        return None
    return found, found + timedelta(days=1)


def _next_month(first: date) -> date:
    return date(first.year + first.month // 12, first.month % 12 + 1, 1)


def in_window_factor(
    window: TimeWindow | None,
    created: npt.NDArray[np.float64],
    stated: npt.NDArray[np.float64],
    candidates: npt.NDArray[np.bool_],
) -> npt.NDArray[np.float64] | None:
    """Each row's relevance factor for `window` (module docstring): 1 for a row created
    or last stated in it (epoch seconds), OUTSIDE_WINDOW_FACTOR for the others; None when
    there is no window or no `candidates` row lies in it (nothing changes)."""
    if window is None:
        return None
    start, end = window.start.timestamp(), window.end.timestamp()
    inside = ((created >= start) & (created < end)) | ((stated >= start) & (stated < end))
    if not (inside & candidates).any():
        return None
    return np.where(inside, 1.0, OUTSIDE_WINDOW_FACTOR)


def weigh_rows(
    relevance: npt.NDArray[np.float64],
    window: TimeWindow | None,
    *,
    created: npt.NDArray[np.float64],
    stated: npt.NDArray[np.float64],
    live: npt.NDArray[np.bool_],
) -> npt.NDArray[np.float64]:
    """`relevance` of a working set's rows weighed by `window` (`in_window_factor`), in
    place; as it was without a window or with no live row in it."""
    factor = in_window_factor(window, created, stated, live)
    if factor is not None:
        relevance *= factor
    return relevance


def weigh_items(
    relevance: Mapping[str, float],
    window: TimeWindow | None,
    items: Iterable[MemoryRecord | EpisodeRecord | Procedure],
) -> dict[str, float]:
    """`relevance` of items by id weighed by `window`, as `weigh_rows` weighs rows."""
    if window is None:
        return dict(relevance)
    inside: dict[str, bool] = {}
    for item in items:
        if isinstance(item, MemoryRecord):
            inside[item.id] = window.contains(item.created_at) or window.contains(item.confirmed_at)
        else:
            inside[item.id] = window.contains(item.created_at)
    if not any(inside.values()):
        return dict(relevance)
    return {
        item_id: value * (1.0 if inside.get(item_id, False) else OUTSIDE_WINDOW_FACTOR)
        for item_id, value in relevance.items()
    }
