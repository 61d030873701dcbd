"""The facade's own door check: every text a call hands to the store must be storable on
both backends (models.schemas.storable_text), and a user id must also fit a URL path.
HTTP and the CLI check the same rules through the wire schemas; this is what a chat app
calling `Memlane` directly meets."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, TypeVar

from pydantic import TypeAdapter, ValidationError

from memlane.models.schemas import UserIdIn, storable_text
from memlane.pipeline.categories import category_problem
from memlane.pipeline.errors import InvalidInputError

P = ParamSpec("P")
R = TypeVar("R")


_USER_ID: TypeAdapter[str] = TypeAdapter(UserIdIn)


def check_text(value: str, name: str) -> str:
    """`value` if it can be stored; InvalidInputError naming `name` otherwise. A user id
    is read by the wire schemas' rule (UserIdIn): stripped, 1 to 200 characters, no
    '/', so `" u1 "` is user `u1` at every door."""
    try:
        if name in ("user_id", "agent_id"):  # an agent id follows the user id's rule
            return _USER_ID.validate_python(value)
        return storable_text(value)
    except ValidationError as exc:
        message = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
        raise InvalidInputError(f"{name}: {message}") from None
    except ValueError as exc:
        raise InvalidInputError(f"{name}: {exc}") from None


def check_category(category: str | None, configured: Sequence[str], *, where: str) -> None:
    """InvalidInputError at `where` when `category` (None: not given) may not be written
    or filtered on under the configured set (MEMLANE_CATEGORIES). Reads never check."""
    problem = None if category is None else category_problem(category, configured)
    if problem is not None:
        raise InvalidInputError(f"{where}: {problem}")


def checked(*names: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A method whose arguments `names` (strings, or None) are checked by `check_text`
    before it runs, and handed to it as `check_text` reads them (a user id stripped)."""

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
                    bound.arguments[name] = check_text(value, name)
            return method(*bound.args, **bound.kwargs)

        return wrapper

    return decorate
