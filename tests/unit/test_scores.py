"""Scores (importance, confidence) refuse NaN and infinity as not numbers, not as out of
range (issue 35, case 14)."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from memlane.pipeline.records import Score01

SCORE = TypeAdapter(Score01)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "nan", "-inf"])
def test_a_score_that_is_not_a_number_says_so(value: object) -> None:
    with pytest.raises(ValidationError) as caught:
        SCORE.validate_python(value)
    message = caught.value.errors()[0]["msg"]
    assert "must be a number" in message and "less than" not in message


def test_scores_in_and_out_of_range() -> None:
    assert SCORE.validate_python("0.5") == 0.5
    with pytest.raises(ValidationError, match="less than or equal to 1"):
        SCORE.validate_python(1.5)
