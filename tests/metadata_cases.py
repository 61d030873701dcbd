"""Random metadata and filters for the metadata property tests: few keys and values, so
that filters often match and often do not."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

KEYS = ("team", "score", "day", "tag")
SCALARS = st.one_of(
    st.sampled_from(["eng", "ops", "2026-01-01", "2026-02-15", "2026-02-15T10:00:00", ""]),
    st.integers(min_value=-3, max_value=5),
    st.sampled_from([0.5, 1.0, 2.5, -1.5]),
    st.booleans(),
)
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=3))
METADATA = st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=4)
NUMBER_BOUND = st.one_of(st.integers(min_value=-3, max_value=5), st.sampled_from([0.5, 2.5]))
DATE_BOUND = st.sampled_from(["2026-01-01", "2026-02-01", "2026-02-15", "2026-02-15T09:00:00"])


def _condition() -> st.SearchStrategy[dict[str, Any]]:
    def ranged(bound: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
        return st.dictionaries(st.sampled_from(["gt", "gte", "lt", "lte"]), bound, min_size=1)

    operators = st.one_of(
        SCALARS,
        st.fixed_dictionaries({"in": st.lists(SCALARS, min_size=1, max_size=3)}),
        st.fixed_dictionaries({"eq": SCALARS}),
        st.fixed_dictionaries({"exists": st.booleans()}),
        ranged(NUMBER_BOUND),
        ranged(DATE_BOUND),
    )
    # "missing" is a key no item holds: a condition on it is false
    return st.dictionaries(st.sampled_from([*KEYS, "missing"]), operators, min_size=1, max_size=2)


FILTERS: st.SearchStrategy[dict[str, Any]] = st.recursive(
    _condition(),
    lambda inner: st.one_of(
        st.fixed_dictionaries({"not": inner}),
        st.fixed_dictionaries({"and": st.lists(inner, min_size=1, max_size=3)}),
        st.fixed_dictionaries({"or": st.lists(inner, min_size=1, max_size=3)}),
    ),
    max_leaves=6,
)
