"""MEMLANE_CATEGORIES read: a category is a short lowercase word (`^[a-z][a-z0-9_]*$`,
at most 16 characters, the store column's width); a set holds 1 to 16 of them, no
repeats. What the set does is memlane.pipeline.categories'.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

DEFAULT_CATEGORIES: tuple[str, ...] = ("preference", "fact", "decision", "project")
MAX_CATEGORY_CHARS = 16
MAX_CATEGORIES = 16
_NAME = re.compile(rf"^[a-z][a-z0-9_]{{0,{MAX_CATEGORY_CHARS - 1}}}$")


def parse_categories(value: str | Sequence[str]) -> tuple[str, ...]:
    """The set from a comma-separated list or a JSON list of names; ValueError names the
    first bad part."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                loaded = json.loads(text)
            except ValueError:
                raise ValueError(f"{text!r} is not a JSON list of category names") from None
            if not isinstance(loaded, list) or not all(isinstance(n, str) for n in loaded):
                raise ValueError(f"{text!r} is not a JSON list of category names")
            names = [name.strip() for name in loaded]
        else:
            names = [name.strip() for name in text.split(",") if name.strip()]
    else:
        names = [str(name).strip() for name in value]
    if not names:
        raise ValueError("at least one category is needed")
    if len(names) > MAX_CATEGORIES:
        raise ValueError(f"{len(names)} categories; at most {MAX_CATEGORIES}")
    for name in names:
        if not _NAME.match(name):
            raise ValueError(
                f"category {name!r} is not a lowercase word (a-z, then a-z, 0-9 or _; "
                f"at most {MAX_CATEGORY_CHARS} characters)"
            )
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"category {repeated[0]!r} is named twice")
    return tuple(names)
