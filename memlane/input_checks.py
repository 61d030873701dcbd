"""The facade's own door check: every text a call hands to the store must be storable on
both backends (models.schemas.storable_text), and a user id must also fit a URL path.
HTTP and the CLI check the same rules through the wire schemas; this is what a chat app
calling `Memlane` directly meets."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from memlane.models.schemas import storable_text, user_id_rule
from memlane.pipeline.errors import InvalidInputError

P = ParamSpec("P")
R = TypeVar("R")


def check_text(value: str, name: str) -> str:
    """`value` if it can be stored; InvalidInputError naming `name` otherwise."""
    try:
        storable_text(value)
        if name == "user_id":
            user_id_rule(value)
    except ValueError as exc:
        raise InvalidInputError(f"{name}: {exc}") from None
    return value


def checked(*names: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A method whose arguments `names` (strings, or None) are checked by `check_text`
    before it runs."""

    def decorate(method: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(method)
        unknown = set(names) - set(signature.parameters)
        if unknown:
            raise TypeError(f"{method.__qualname__} has no argument {sorted(unknown)}")

        @functools.wraps(method)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            bound = signature.bind(*args, **kwargs)
            for name in names:
                value: Any = bound.arguments.get(name)
                if isinstance(value, str):
                    check_text(value, name)
            return method(*args, **kwargs)

        return wrapper

    return decorate
