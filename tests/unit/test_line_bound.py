"""A line's least cost (pipeline.assembly.line_bound) is never more than its tokens, for any
content, ref, date, importance and name, in every style and known encoding."""

from __future__ import annotations

import math
import sys
from datetime import UTC, datetime

import numpy as np
import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from memlane.pipeline.assembly import context_format as fmt
from memlane.pipeline.assembly import line_bound
from memlane.pipeline.assembly.tokens import ENCODING_SPECS, get_encoding
from tests.unit.assembly_helpers import episode, mem, procedure

ENCODINGS = [get_encoding(name) for name in ENCODING_SPECS]

# text a tokeniser may split oddly: words, digits, punctuation runs, every kind of
# whitespace, entities, characters XML refuses, letters of other scripts
SPACES = [" ", "  ", "\t", "\n", "\r\n", " \n ", "\x0b", "\x1c", "\u00a0", "\u2028", "\u3000"]
WORDS = ["a", "Ana", "works", "'s", "I'm", "2023", "12345", "3.14", "&", "<", ">", '"', "/"]
ODD = ["</m>", ". ", "...", "--", "_", "\x00", "\ud800", "é", "日本語", "🙂", "ÀÉÎ", "ß"]
pieces = st.sampled_from([*SPACES, *WORDS, *ODD])
text = st.lists(pieces | st.text(max_size=6), max_size=30).map("".join)


@settings(max_examples=400, deadline=None)
@given(
    content=text,
    name=text,
    ref=st.none() | st.integers(min_value=1, max_value=10**7),
    importance=st.floats(min_value=0, max_value=1),
    when=st.datetimes(
        min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
    ),
    style=st.sampled_from(fmt.STYLES),
)
def test_the_least_cost_of_a_line_is_at_most_its_tokens(
    content, name, ref, importance, when, style
) -> None:
    memory = mem("mem_1", content, importance=importance, created_at=when, ref=ref)
    talk = episode("ep_1", content).model_copy(update={"created_at": when, "ref": ref})
    steps = procedure("pr_1", name or "x", set()).model_copy(
        update={"content": content, "ref": ref}
    )
    lines = {
        "memory": fmt.memory_line(memory, style),
        "episode": fmt.episode_line(talk, style),
        "procedure": fmt.procedure_line(steps, style),
    }
    refs = np.array([math.nan if ref is None else ref], dtype=np.float64)
    for encoding in ENCODINGS:
        for kind, line in lines.items():
            date = when.timestamp() if line_bound.dated(style, kind) else math.nan
            least = line_bound.floor(encoding, style, kind) + line_bound.runs(content)
            least += line_bound.markup_extra(encoding, refs, np.array([date]))[0]
            assert least <= len(encoding.encode_ordinary(line)), (kind, line)


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_four_digit_refs_and_years_add_a_token_each_where_digits_are_cut_in_threes(
    name,
) -> None:
    encoding = get_encoding(name)
    refs = np.array([7.0, 999.0, 1000.0, 5445.0, 1234567.0, math.nan])
    no_date = np.full(len(refs), math.nan)
    assert line_bound.markup_extra(encoding, refs, no_date).tolist() == [0, 0, 1, 1, 2, 0]
    dates = np.array([datetime(year, 1, 1, tzinfo=UTC).timestamp() for year in (999, 2024)])
    assert line_bound.markup_extra(encoding, np.full(2, math.nan), dates).tolist() == [0, 1]


def test_digits_kept_whole_add_nothing() -> None:
    p50k = get_encoding("p50k_base")
    assert not line_bound.markup_extra(p50k, np.array([123456.0]), np.array([0.0])).any()


def test_a_run_start_is_never_whitespace_to_the_tokenisers() -> None:
    # the bound counts runs between Python's whitespace; the patterns' \s must be in it
    space = regex.compile(r"\s")
    assert all(
        chr(c).isspace() for c in range(sys.maxunicode + 1) if space.match(chr(c)) is not None
    )


def test_runs_counts_words_after_spaces_only() -> None:
    assert line_bound.runs("Ana works in Paris.") == 4
    assert line_bound.runs("  two  spaces ") == 2
    assert line_bound.runs("a\nb") == 1  # a newline starts no run
    assert line_bound.runs("a \u00a0b") == 1  # after the space comes whitespace
    assert line_bound.runs("") == 0


def test_an_unknown_pattern_has_no_floor() -> None:
    import tiktoken

    p50k = get_encoding("p50k_base")
    other = tiktoken.Encoding(
        "other", pat_str=r"\S+|\s+", mergeable_ranks=p50k._mergeable_ranks, special_tokens={}
    )
    assert line_bound.floor(other, "default", "memory") == 0
    assert not line_bound.known(other)
    assert line_bound.floor(get_encoding("o200k_base"), "default", "memory") > 0


@given(content=text)
def test_runs_of_plain_text_are_counted_as_the_pattern_counts_them(content) -> None:
    import re

    assert line_bound.runs(content) == len(re.findall(r"(?:^| )\S", content))


@settings(max_examples=300)
@given(texts=st.lists(text | st.text(alphabet=" ab\t\n\x1f\u00a0é") | st.text(), max_size=8))
def test_runs_of_texts_at_once_equals_runs_of_each(texts) -> None:
    counted = line_bound.runs_of(texts)
    assert counted.dtype.kind == "f"
    assert counted.tolist() == [line_bound.runs(t) for t in texts]
