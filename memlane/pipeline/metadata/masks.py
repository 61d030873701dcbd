"""A metadata filter over a working set's rows (pipeline.ranking.user_view): which rows an
assembly may use, from each item's metadata held beside the view, with no store read.

Memories and episodes are filtered; procedures carry no metadata and are not (nor are
soul blocks, which are no rows). Items of equal metadata share one object (a
conversation's, handed to everything learned from it), so the rows are grouped by
object once per view (`Groups`), and a filter judges each object once: a new filter on a
view costs its objects, not its rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from memlane.pipeline.metadata.compiled import compiled
from memlane.pipeline.metadata.filters import Filter
from memlane.pipeline.metadata.values import Value


@dataclass(frozen=True, slots=True)
class Groups:
    """Row i holds `objects[rows[i]]`; object 0 is `{}`, the rows without metadata."""

    rows: npt.NDArray[np.intp]
    objects: tuple[Mapping[str, Value], ...]


def groups_of(ids: Sequence[str], metadata_of: Mapping[str, Mapping[str, Value]]) -> Groups:
    """The rows of `ids` grouped by their item's metadata object (none: `{}`)."""
    objects: list[Mapping[str, Value]] = [{}]
    index: dict[int, int] = {id(None): 0}

    def group(metadata: Mapping[str, Value] | None) -> int:
        at = index.get(id(metadata))  # the objects live in metadata_of meanwhile
        if at is None:
            at = index[id(metadata)] = len(objects)
            objects.append(metadata)  # type: ignore[arg-type]  # None is index 0's
        return at

    rows = np.fromiter(map(group, map(metadata_of.get, ids)), np.intp, len(ids))
    return Groups(rows, tuple(objects))


def allowed_rows(
    groups: Groups, unfiltered: npt.NDArray[np.bool_], f: Filter
) -> npt.NDArray[np.bool_]:
    """Row i passes when `unfiltered[i]` or its metadata passes `f`."""
    judge = compiled(f)
    verdicts = np.fromiter(map(judge, groups.objects), np.bool_, len(groups.objects))
    allowed: npt.NDArray[np.bool_] = verdicts[groups.rows]
    allowed |= unfiltered
    return allowed
