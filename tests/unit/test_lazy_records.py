"""LazyRecords: a view's records in chunks shared between patched copies."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memlane.pipeline.assembly import context_format as fmt
from memlane.pipeline.assembly import exact_walk
from memlane.pipeline.ranking.memory_table import LazyRecords, MemoryTable
from memlane.pipeline.ranking.user_view import UserView
from tests.unit.assembly_helpers import mem


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


def test_a_line_is_read_without_its_record_until_the_record_is_built_or_given() -> None:
    # given a view of memories whose records are built on first use
    memories = [
        mem(f"mem_{i}", f"Memory number {i}.", importance=i / 10, ref=998 + i) for i in range(4)
    ]
    table = MemoryTable.of_records(memories, [None] * 4, model=None, dim=None)
    view = UserView.load(
        memories=table,
        episodes=[],
        episode_vectors=[],
        procedures=[],
        soul_blocks=[],
        model=None,
        dim=None,
    )
    for style in fmt.STYLES:
        # when the exact walk renders each row's line
        lines = [exact_walk._counted_line(view, row, style) for row in range(4)]
        # then they are the lines of the records, and no record was built for them
        assert lines == [fmt.memory_line(m, style) for m in memories]
        assert view.records.made == 0
    # once built, or given by a patch, the record is what the line is read from
    view.records[1]
    assert view.records.line_fields(1) is view.records[1]
    changed = memories[2].model_copy(update={"content": "Changed.", "ref": 5})
    patched = view.patch([(changed, None)], [], [])
    assert exact_walk._counted_line(patched, 2, "default") == fmt.memory_line(changed)
    assert patched.records.line_fields(3) == (
        1001,
        "mem_3",
        0.3,
        memories[3].created_at,
        "Memory number 3.",
    )
