"""A filter compiled to a predicate: `matches` (pipeline.metadata.filters) without its
dispatch on every call, for the working set, which judges every row of a view at once
(pipeline.metadata.masks). `matches` is the meaning; tests hold the two equal.

Equality tests a value's type, then a set of the wanted values of that type: JSON's
equality (1 equals 1.0; true is no number) with a hash lookup, lists element by element.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from memlane.pipeline.metadata.filters import All, Any_, Equals, Exists, Filter, Not, Within
from memlane.pipeline.metadata.values import Value

Predicate = Callable[[Mapping[str, Value]], bool]
_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "gt": operator.gt,
    "gte": operator.ge,
    "lt": operator.lt,
    "lte": operator.le,
}


def compiled(f: Filter) -> Predicate:
    """The predicate of `f` on an item's metadata."""
    if isinstance(f, All | Any_):
        parts = [compiled(part) for part in f.parts]
        if len(parts) == 1:
            return parts[0]
        wanted = isinstance(f, Any_)  # the verdict that ends the loop

        def joined(m: Mapping[str, Value]) -> bool:
            for part in parts:  # a loop, not all(): no generator made per item
                if part(m) is wanted:
                    return wanted
            return not wanted

        return joined
    if isinstance(f, Not):
        part = compiled(f.part)
        return lambda m: not part(m)
    key = f.key
    if isinstance(f, Exists):
        present = f.present
        return lambda m: (m.get(key) is not None) == present
    scalar = _equals(f) if isinstance(f, Equals) else _within(f)

    def predicate(m: Mapping[str, Value]) -> bool:
        held = m.get(key)
        if held is None:
            return False
        if type(held) is list:
            return any(map(scalar, held))
        return scalar(held)

    return predicate


def _equals(f: Equals) -> Callable[[object], bool]:
    strings = frozenset(v for v in f.values if type(v) is str)
    flags = frozenset(v for v in f.values if type(v) is bool)
    numbers = frozenset(v for v in f.values if type(v) in (int, float))

    def scalar(value: object) -> bool:
        kind = type(value)
        if kind is str:
            return value in strings
        if kind is bool:
            return value in flags
        return value in numbers

    return scalar


def _within(f: Within) -> Callable[[object], bool]:
    bounds: list[tuple[Callable[[Any, Any], bool], float | str]]
    bounds = [(_OPS[op], bound) for op, bound in f.bounds]
    kinds: tuple[type, ...] = (int, float) if f.numeric else (str,)

    def scalar(value: object) -> bool:
        if type(value) not in kinds:
            return False
        for op, bound in bounds:  # noqa: SIM110  # a loop: no generator made per value
            if not op(value, bound):
                return False
        return True

    return scalar
