"""LazyRecords: a view's records in chunks shared between patched copies."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memlane.pipeline.memory_table import LazyRecords


class Small(LazyRecords):
    CHUNK = 4  # chunk edges within a few rows


def made(row: int) -> str:
    return f"made {row}"


@given(
    length=st.integers(min_value=0, max_value=30),
    patches=st.lists(
        st.tuples(
            st.dictionaries(st.integers(min_value=0, max_value=40), st.text(max_size=3)),
            st.integers(min_value=0, max_value=12),
        ),
        max_size=4,
    ),
)
def test_patched_copies_read_as_lists_and_leave_their_origin_as_it_was(length, patches):
    records = Small([None] * length, made)  # type: ignore[arg-type]
    expected = [made(row) for row in range(length)]
    views = [(records, list(expected))]
    for rows, grow in patches:
        new_length = len(expected) + grow
        rows = {row: record for row, record in rows.items() if row < new_length}
        records = records.with_rows(rows, new_length)  # type: ignore[arg-type]
        expected = expected + [made(row) for row in range(len(expected), new_length)]
        for row, record in rows.items():
            expected[row] = record
        views.append((records, list(expected)))
    for view, wanted in views:  # every copy, the earlier ones after the later were made
        assert len(view) == len(wanted)
        assert list(view) == wanted
