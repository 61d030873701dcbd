"""The metadata filter language, parsed, and what it means (`matches`).

A filter is a JSON object; each of its entries is a condition and all must hold:

- `{"team": "eng"}`: equality. A key holding a list matches when any element equals.
- `{"team": {"in": ["eng", "ops"]}}`: equal to any of them (a non-empty list).
- `{"score": {"gte": 1, "lt": 5}}`: a range, `gt`/`gte`/`lt`/`lte`, its bounds all numbers
  (matching number values) or all ISO 8601 dates or times as strings (matching string
  values, compared as strings: store dates in one form, e.g. `2026-01-31`). A list matches
  when one of its elements is within every bound.
- `{"team": {"exists": true}}`: the key is present (`false`: absent).
- `{"eq": v}` is the long form of equality; one object may join several of these
  operators (all must hold).
- `{"not": {...}}`, `{"and": [{...}, ...]}`, `{"or": [{...}, ...]}`.

Values compare as JSON does: `1` equals `1.0`, never `true` nor `"1"`. A condition on a
key an item does not hold is false, so a filter naming unknown keys matches nothing; `not`
is plain negation, so `{"not": {"team": "eng"}}` matches every item whose team is not
eng, items without a team included. `{}` matches everything.

A filter nests at most MAX_DEPTH deep and holds at most MAX_CONDITIONS conditions. A bad
part is a MetadataError whose path leads to it from the filter's root.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime

from memlane.pipeline.metadata.values import (
    MetadataError,
    Path,
    Scalar,
    Value,
    check_key,
    is_scalar,
    same_value,
    values_of,
)

MAX_DEPTH = 8
MAX_CONDITIONS = 64
RANGE_OPS = ("gt", "gte", "lt", "lte")
_ROOT = "filter"


@dataclass(frozen=True, slots=True)
class Equals:
    """The key holds one of `values` (or a list with one of them)."""

    key: str
    values: tuple[Scalar, ...]


@dataclass(frozen=True, slots=True)
class Within:
    """The key holds a value (or a list with an element) within every bound; the bounds
    are all numbers or all strings (`numeric`)."""

    key: str
    bounds: tuple[tuple[str, float | str], ...]  # (op of RANGE_OPS, bound)
    numeric: bool


@dataclass(frozen=True, slots=True)
class Exists:
    key: str
    present: bool


@dataclass(frozen=True, slots=True)
class Not:
    part: Filter


@dataclass(frozen=True, slots=True)
class All:
    parts: tuple[Filter, ...]  # none: true


@dataclass(frozen=True, slots=True)
class Any_:
    parts: tuple[Filter, ...]  # at least one


Filter = Equals | Within | Exists | Not | All | Any_
EVERYTHING = All(())


def _bad(message: str, path: Path) -> MetadataError:
    return MetadataError(message, path=path, root=_ROOT)


class _Parser:
    def __init__(self) -> None:
        self.conditions = 0

    def count(self, path: Path) -> None:
        self.conditions += 1
        if self.conditions > MAX_CONDITIONS:
            raise _bad(f"a filter holds at most {MAX_CONDITIONS} conditions", path)

    def node(self, raw: object, path: Path, depth: int) -> Filter:
        if depth > MAX_DEPTH:
            raise _bad(f"a filter nests at most {MAX_DEPTH} deep", path)
        if not isinstance(raw, Mapping):
            raise _bad("a filter is a JSON object of conditions", path)
        parts = [self.entry(key, value, (*path, str(key)), depth) for key, value in raw.items()]
        return parts[0] if len(parts) == 1 else All(tuple(parts))

    def entry(self, key: object, value: object, path: Path, depth: int) -> Filter:
        if key == "not":
            return Not(self.node(value, path, depth + 1))
        if key in ("and", "or"):
            if not isinstance(value, list) or not value:
                raise _bad(f"`{key}` takes a non-empty list of filters", path)
            parts = tuple(self.node(v, (*path, i), depth + 1) for i, v in enumerate(value))
            return All(parts) if key == "and" else Any_(parts)
        name = check_key(key, path, root=_ROOT)
        if not isinstance(value, Mapping):
            self.count(path)
            return Equals(name, (_scalar(value, path),))
        if not value:
            raise _bad(
                "an empty condition: give an operator (eq, in, gt, gte, lt, lte, exists)", path
            )
        return self.operators(name, value, path)

    def operators(self, key: str, ops: Mapping[object, object], path: Path) -> Filter:
        parts: list[Filter] = []
        bounds: list[tuple[str, float | str]] = []
        for op, operand in ops.items():
            at = (*path, str(op))
            self.count(at)
            if op == "eq":
                parts.append(Equals(key, (_scalar(operand, at),)))
            elif op == "in":
                if not isinstance(operand, list) or not operand:
                    raise _bad("`in` takes a non-empty list of values", at)
                parts.append(
                    Equals(key, tuple(_scalar(v, (*at, i)) for i, v in enumerate(operand)))
                )
            elif op == "exists":
                if not isinstance(operand, bool):
                    raise _bad("`exists` takes true or false", at)
                parts.append(Exists(key, operand))
            elif op in RANGE_OPS:
                bounds.append((str(op), _bound(operand, at)))
            else:
                raise _bad(f"unknown operator `{op}`: use eq, in, gt, gte, lt, lte or exists", at)
        if bounds:
            kinds = {isinstance(b, str) for _, b in bounds}
            if len(kinds) > 1:
                raise _bad("a range's bounds are all numbers or all dates", path)
            parts.append(Within(key, tuple(bounds), numeric=not kinds.pop()))
        return parts[0] if len(parts) == 1 else All(tuple(parts))


def _scalar(value: object, path: Path) -> Scalar:
    if not is_scalar(value):
        raise _bad("compare with a string, a boolean or a finite number within ±2^53", path)
    return value  # type: ignore[return-value]  # is_scalar checked its type


def _bound(value: object, path: Path) -> float | str:
    if isinstance(value, str):
        try:
            date.fromisoformat(value) if len(value) == 10 else datetime.fromisoformat(value)
        except ValueError:
            raise _bad(
                "a range's bound is a number or an ISO 8601 date (2026-01-31)", path
            ) from None
        return value
    if isinstance(value, bool) or not is_scalar(value):
        raise _bad("a range's bound is a number or an ISO 8601 date (2026-01-31)", path)
    return value  # type: ignore[return-value]  # a number: checked above


def parse_filter(raw: object) -> Filter:
    """`raw` (a decoded JSON object, or None for no filter) as a Filter (module
    docstring); a MetadataError naming the path of the first bad part."""
    if raw is None:
        return EVERYTHING
    return _Parser().node(raw, (), 1)


def filter_of(raw: Mapping[str, object] | str | None) -> Filter | None:
    """A filter as a door hands it over (a decoded JSON object, its text from a query
    parameter or a CLI option, or None for no filter); a MetadataError naming the bad
    part, or saying the text is no JSON."""
    if raw is None:
        return None
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise _bad(
                f"not JSON ({exc.msg} at character {exc.pos}): a filter is a JSON object, "
                'e.g. {"team": "eng"}',
                (),
            ) from None
    return parse_filter(raw)


def _within(value: Scalar, f: Within) -> bool:
    if f.numeric:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
    elif not isinstance(value, str):
        return False
    for op, bound in f.bounds:
        v, b = value, bound
        if op == "gt" and not v > b:  # type: ignore[operator]  # same kinds: checked
            return False
        if op == "gte" and not v >= b:  # type: ignore[operator]
            return False
        if op == "lt" and not v < b:  # type: ignore[operator]
            return False
        if op == "lte" and not v <= b:  # type: ignore[operator]
            return False
    return True


def matches(metadata: Mapping[str, Value] | None, f: Filter) -> bool:
    """Whether an item of this metadata passes the filter (module docstring)."""
    if isinstance(f, All):
        return all(matches(metadata, part) for part in f.parts)
    if isinstance(f, Any_):
        return any(matches(metadata, part) for part in f.parts)
    if isinstance(f, Not):
        return not matches(metadata, f.part)
    held = None if metadata is None else metadata.get(f.key)
    if isinstance(f, Exists):
        return (held is not None) == f.present
    if held is None:
        return False
    if isinstance(f, Equals):
        return any(same_value(v, want) for v in values_of(held) for want in f.values)
    return any(_within(v, f) for v in values_of(held))


def keys_of(f: Filter) -> frozenset[str]:
    """The keys a filter names."""
    if isinstance(f, All | Any_):
        return frozenset().union(*(keys_of(part) for part in f.parts))
    if isinstance(f, Not):
        return keys_of(f.part)
    return frozenset({f.key})
