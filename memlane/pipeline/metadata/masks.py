"""A metadata filter over a working set's rows (pipeline.ranking.user_view): which rows an
assembly may use, from each item's metadata held beside the view, with no store read.

Memories and episodes are filtered; procedures carry no metadata and are not (nor are
soul blocks, which are no rows). Items of equal metadata usually share one object (a
conversation's, handed to everything learned from it), so `matches` runs once per
object, not once per row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from memlane.pipeline.metadata.compiled import compiled
from memlane.pipeline.metadata.filters import Filter
from memlane.pipeline.metadata.values import Value


def allowed_rows(
    ids: Sequence[str],
    unfiltered: npt.NDArray[np.bool_],
    metadata_of: Mapping[str, Mapping[str, Value]],
    f: Filter,
) -> npt.NDArray[np.bool_]:
    """Row i passes when `unfiltered[i]` or its item's metadata (`metadata_of[ids[i]]`,
    none: `{}`) passes `f`."""
    judge = compiled(f)
    objects = list(map(metadata_of.get, ids))
    verdicts = {id(m): judge(m) for m in objects if m is not None}  # once per object
    verdicts[id(None)] = judge({})
    allowed = np.fromiter(map(verdicts.__getitem__, map(id, objects)), np.bool_, len(ids))
    allowed |= unfiltered
    return allowed
