"""pipeline.metadata: what metadata may hold, how two conversations' merge, the filter
language's parse (errors name the bad part's path) and meaning, and the working set's
row mask."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memlane.pipeline.metadata.compiled import compiled
from memlane.pipeline.metadata.filters import (
    EVERYTHING,
    All,
    Equals,
    Within,
    filter_of,
    matches,
    parse_filter,
)
from memlane.pipeline.metadata.masks import allowed_rows, groups_of
from memlane.pipeline.metadata.values import (
    MAX_BYTES,
    MAX_KEYS,
    MAX_LIST,
    MetadataError,
    check_metadata,
    merge_metadata,
    same_value,
    values_of,
)
from tests.metadata_cases import FILTERS as CASE_FILTERS
from tests.metadata_cases import METADATA as CASE_METADATA

SCALARS = st.one_of(
    st.text(max_size=5),
    st.integers(min_value=-5, max_value=5),
    st.sampled_from([0.5, 1.0, -2.5]),
    st.booleans(),
)
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=4))
METADATA = st.dictionaries(st.sampled_from(["a", "b", "c", "team"]), VALUES, max_size=4)


# ------------------------------------------------------------------ values


@pytest.mark.parametrize(
    ("raw", "path", "reason"),
    [
        ([], (), "metadata is a JSON object"),
        ({"": 1}, ("",), "a key is 1 to 64"),
        ({"a b": 1}, ("a b",), "a key is 1 to 64"),
        ({"_x": 1}, ("_x",), "starting with a letter or digit"),
        ({"k" * 65: 1}, ("k" * 65,), "a key is 1 to 64"),
        ({"or": 1}, ("or",), "`or` is a word of the filter language"),
        ({"a": None}, ("a",), "null is not a value"),
        ({"a": {"b": 1}}, ("a",), "a value is a string"),
        ({"a": [1, [2]]}, ("a", 1), "a value is a string"),
        ({"a": float("nan")}, ("a",), "a value is a string"),
        ({"a": 2**53 + 1}, ("a",), "within ±2^53"),
        ({"a": list(range(MAX_LIST + 1))}, ("a",), f"at most {MAX_LIST} values"),
        ({f"k{i}": i for i in range(MAX_KEYS + 1)}, (), f"at most {MAX_KEYS} keys"),
        ({"a": "x" * MAX_BYTES}, (), f"at most {MAX_BYTES} bytes"),
    ],
)
def test_bad_metadata_names_its_bad_part(raw: Any, path: tuple[Any, ...], reason: str) -> None:
    with pytest.raises(MetadataError) as refused:
        check_metadata(raw)
    assert refused.value.path == path
    assert reason in refused.value.reason
    assert str(refused.value).startswith(".".join(["metadata", *map(str, path)]) + ": ")


def test_good_metadata_is_kept_as_given() -> None:
    given_ = {"team": "eng", "n": 3, "x": 1.5, "ok": True, "tags": ["a", 1, False], "e": []}
    assert check_metadata(given_) == given_
    assert check_metadata(None) == {}


def test_json_equality_keeps_booleans_numbers_and_strings_apart() -> None:
    assert same_value(1, 1.0)
    assert not same_value(1, True)
    assert not same_value(True, 1)
    assert not same_value("1", 1)
    assert same_value(False, False)


def test_a_merge_holds_both_values_once_in_a_fixed_order() -> None:
    assert merge_metadata({"team": "eng", "a": 1}, {"team": "ops", "b": 2}) == {
        "team": ["eng", "ops"],
        "a": 1,
        "b": 2,
    }
    assert merge_metadata({"team": "eng"}, {"team": "eng"}) == {"team": "eng"}
    assert merge_metadata({"t": ["b", 1]}, {"t": [True, "a", 1.0]}) == {"t": [True, 1, "a", "b"]}
    # a list of one value confirmed by the scalar: the same value, kept as it was
    assert merge_metadata({"t": [1]}, {"t": 1}) == {"t": 1}


def test_a_merge_past_the_bounds_keeps_what_was_held() -> None:
    big = {"k": "x" * (MAX_BYTES - 20)}
    assert merge_metadata(big, {"k": "y" * 100}) == big
    full = {"t": list(range(MAX_LIST))}
    assert merge_metadata(full, {"t": MAX_LIST}) == full  # the first MAX_LIST in order
    keys = {f"k{i}": i for i in range(MAX_KEYS)}
    assert merge_metadata(keys, {"other": 1}) == keys


@given(a=METADATA, b=METADATA)
def test_a_merge_is_the_same_whichever_came_first_and_keeps_every_value(
    a: dict[str, Any], b: dict[str, Any]
) -> None:
    ab, ba = merge_metadata(a, b), merge_metadata(b, a)
    assert set(ab) == set(a) | set(b)
    for key in set(a) & set(b):
        if values_of(a[key]) != values_of(b[key]) or isinstance(a[key], list) != isinstance(
            b[key], list
        ):
            assert _typed(ab[key]) == _typed(ba[key])
        for value in [*values_of(a[key]), *values_of(b[key])]:
            assert any(same_value(value, held) for held in values_of(ab[key]))
    check_metadata(ab)  # still metadata


def _typed(value: Any) -> list[tuple[str, Any]]:
    return [(type(v).__name__, v) for v in values_of(value)]


# ------------------------------------------------------------------ filters


@pytest.mark.parametrize(
    ("raw", "path", "reason"),
    [
        ([], (), "a filter is a JSON object"),
        ({"a": {}}, ("a",), "an empty condition"),
        ({"a": {"in": []}}, ("a", "in"), "`in` takes a non-empty list"),
        ({"a": {"in": [1, {"x": 1}]}}, ("a", "in", 1), "compare with a string"),
        ({"a": {"like": "x"}}, ("a", "like"), "unknown operator `like`"),
        ({"a": {"exists": 1}}, ("a", "exists"), "`exists` takes true or false"),
        ({"a": {"gt": True}}, ("a", "gt"), "a range's bound is a number or an ISO 8601 date"),
        ({"a": {"gt": "soon"}}, ("a", "gt"), "a range's bound"),
        ({"a": {"gt": 1, "lt": "2026-01-01"}}, ("a",), "all numbers or all dates"),
        ({"a": None}, ("a",), "compare with a string"),
        ({"and": []}, ("and",), "`and` takes a non-empty list"),
        ({"or": {"a": 1}}, ("or",), "`or` takes a non-empty list"),
        ({"or": [{"a": 1}, {"b": {"x": 2}}]}, ("or", 1, "b", "x"), "unknown operator"),
        ({"not": [1]}, ("not",), "a filter is a JSON object"),
        ({"a b": 1}, ("a b",), "a key is 1 to 64"),
        (
            {"not": {"not": {"not": {"not": {"not": {"not": {"not": {"not": {}}}}}}}}},
            ("not",) * 8,
            "nests at most 8 deep",
        ),
        (
            {"a": {"in": list(range(65))}} | {f"k{i}": i for i in range(64)},
            ("k63",),
            "at most 64 conditions",
        ),
    ],
)
def test_a_bad_filter_names_the_path_of_its_bad_part(
    raw: Any, path: tuple[Any, ...], reason: str
) -> None:
    with pytest.raises(MetadataError) as refused:
        parse_filter(raw)
    assert refused.value.path == path
    assert reason in refused.value.reason
    assert str(refused.value).startswith(".".join(["filter", *map(str, path)]) + ": ")


def test_filter_text_is_parsed_and_text_that_is_no_json_is_named() -> None:
    assert filter_of(None) is None
    assert filter_of('{"a": 1}') == Equals("a", (1,))
    with pytest.raises(MetadataError, match=r"^filter: not JSON"):
        filter_of("{a: 1}")


def test_the_parse_joins_operators_of_one_key() -> None:
    assert parse_filter({}) == EVERYTHING
    assert parse_filter({"s": {"gte": 1, "lt": 5}}) == Within("s", (("gte", 1), ("lt", 5)), True)
    assert parse_filter({"t": {"in": ["a", "b"], "exists": True}}) == All(
        (Equals("t", ("a", "b")), parse_filter({"t": {"exists": True}}))
    )


M = {"team": ["eng", "ops"], "score": 3, "day": "2026-02-03", "flag": True, "ratio": 0.5}


@pytest.mark.parametrize(
    ("raw", "passes"),
    [
        ({"team": "eng"}, True),  # any element of a list
        ({"team": {"eq": "web"}}, False),
        ({"team": {"in": ["web", "ops"]}}, True),
        ({"score": 3.0}, True),
        ({"score": "3"}, False),
        ({"flag": 1}, False),
        ({"flag": True}, True),
        ({"score": {"gt": 2, "lte": 3}}, True),
        ({"score": {"gt": 3}}, False),
        ({"ratio": {"lt": 1}}, True),
        ({"day": {"gte": "2026-02-01", "lt": "2026-03-01"}}, True),
        ({"day": {"gte": 1}}, False),  # a string is no number
        ({"score": {"gte": "2026-01-01"}}, False),  # a number is no date
        ({"team": {"gt": 1}}, False),
        ({"missing": "x"}, False),
        ({"missing": {"exists": False}}, True),
        ({"not": {"missing": "x"}}, True),  # plain negation
        ({"team": {"exists": True}, "score": 4}, False),
        ({"or": [{"score": 4}, {"flag": True}]}, True),
        ({"and": [{"score": 3}, {"not": {"team": "ops"}}]}, False),
        ({}, True),
    ],
)
def test_matches_by_example(raw: dict[str, Any], passes: bool) -> None:
    assert matches(M, parse_filter(raw)) is passes


def test_a_list_is_within_a_range_when_one_element_is_within_every_bound() -> None:
    f = parse_filter({"s": {"gt": 1, "lt": 3}})
    assert not matches({"s": [0, 5]}, f)  # each bound met by some element, none by one
    assert matches({"s": [0, 2]}, f)


@given(
    metadata=METADATA, raw=st.sampled_from([{"a": 1}, {"b": {"in": ["x", 1]}}, {"c": {"gte": 0}}])
)
def test_not_is_the_negation_and_empty_lists_hold_nothing(
    metadata: dict[str, Any], raw: dict[str, Any]
) -> None:
    f = parse_filter(raw)
    assert matches(metadata, parse_filter({"not": raw})) is not matches(metadata, f)
    assert matches(metadata, parse_filter({"and": [raw, raw]})) is matches(metadata, f)
    assert not matches({k: [] for k in metadata}, f)


# ------------------------------------------------------------------ masks


def test_the_mask_passes_procedures_and_judges_each_metadata_object_once() -> None:
    eng = {"team": "eng"}
    metadata = {"m1": eng, "m2": eng, "e1": {"team": "ops"}}
    ids = ["m1", "m2", "m3", "e1", "p1"]
    groups = groups_of(ids, metadata)
    assert groups.rows.tolist() == [1, 1, 0, 2, 0]  # m1 and m2 share one object
    assert groups.objects == ({}, eng, {"team": "ops"})
    unfiltered = np.array([False, False, False, False, True])
    allowed = allowed_rows(groups, unfiltered, parse_filter({"team": "eng"}))
    assert allowed.tolist() == [True, True, False, False, True]
    missing = allowed_rows(groups, unfiltered, parse_filter({"not": {"team": "eng"}}))
    assert missing.tolist() == [False, False, True, True, True]


@given(metadata=st.lists(CASE_METADATA, max_size=6), raw=CASE_FILTERS)
def test_the_compiled_predicate_is_matches(metadata: list[dict[str, Any]], raw: Any) -> None:
    f = parse_filter(raw)
    judge = compiled(f)
    for m in [*metadata, {}]:
        assert judge(check_metadata(m)) is matches(m, f), (m, raw)
