"""The category set: which categories new memories may take (MEMLANE_CATEGORIES, whose
names memlane.config.categories checks). The set is checked where a memory is written or
a filter is given (every front door, import), never where one is read: a memory keeps a
category later removed from the set and still lists, exports and assembles.

The offline extractor knows only the four default categories; `fit_category` maps its
choice onto the configured set: kept when configured, else the first configured category.
"""

from __future__ import annotations

from collections.abc import Sequence

# The same four as memlane.config.categories' default (config imports nothing of the
# project; tests/unit/test_categories.py holds them equal).
DEFAULT_CATEGORIES: tuple[str, ...] = ("preference", "fact", "decision", "project")


def category_problem(category: str, configured: Sequence[str]) -> str | None:
    """Why `category` may not be written under the configured set, or None."""
    if category in configured:
        return None
    return (
        f"{category!r} is not a configured category; one of {', '.join(configured)} "
        "(MEMLANE_CATEGORIES)"
    )


def fit_category(category: str, configured: Sequence[str]) -> str:
    """An extractor's category on the configured set: itself when configured, else the
    first configured category."""
    return category if category in configured else configured[0]
