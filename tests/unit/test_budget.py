from __future__ import annotations

from datetime import UTC, datetime
from functools import partial

import pytest

from memlane.pipeline.assembly import budget as budget_rules
from memlane.pipeline.assembly.budget import (
    MAX_BUDGET_TOKENS,
    MIN_MEMORY_LINE_TOKENS,
    BudgetAsk,
    BudgetDefaults,
    resolve_budget,
    strategy_top_k,
    validate_budget,
)
from memlane.pipeline.assembly.context_format import Style, memory_line
from memlane.pipeline.assembly.tokens import get_encoding
from memlane.pipeline.errors import BudgetError
from tests.defaults import SAFETY_MARGIN
from tests.unit.assembly_helpers import mem

# The settings' defaults, passed as memlane's callers pass the settings.
derive_budget = partial(budget_rules.derive_budget, safety_margin=SAFETY_MARGIN)


def test_the_article_example() -> None:
    # 128,000 − 2,000 − 1,000 − 4,000 = 121,000; × 0.9 = 108,900
    budget = derive_budget(
        context_window=128_000,
        system_prompt_tokens=2_000,
        user_message_tokens=1_000,
        output_headroom=4_000,
        safety_margin=0.10,
    )
    assert budget == 108_900


def test_the_margin_defaults_to_ten_percent() -> None:
    assert (
        derive_budget(
            context_window=8_000,
            system_prompt_tokens=500,
            user_message_tokens=300,
            output_headroom=1_000,
        )
        == 5_580
    )  # 6,200 × 0.9


@pytest.mark.parametrize(
    ("window", "margin", "expected"),
    [
        (90, 0.3, 63),  # 90 × (1 − 0.3) is 62.999… in binary floats
        (1_000, 0.0, 1_000),
        (1_001, 0.1, 900),  # 900.9 rounds down: never over
        (3, 0.5, 1),
    ],
)
def test_margin_is_exact_and_rounds_down(window: int, margin: float, expected: int) -> None:
    budget = derive_budget(
        context_window=window,
        system_prompt_tokens=0,
        user_message_tokens=0,
        output_headroom=0,
        safety_margin=margin,
    )
    assert budget == expected


def test_no_room_left_is_a_budget_error_saying_how_much_is_missing() -> None:
    with pytest.raises(BudgetError, match="leave 0") as caught:
        derive_budget(
            context_window=6_000,
            system_prompt_tokens=2_000,
            user_message_tokens=1_000,
            output_headroom=4_000,
        )
    # a one-token budget needs 7,000 reserved + 2 (2 × 0.9 ≥ 1): 7,002 − 6,000
    assert caught.value.over_by == 1_002
    assert caught.value.budget == 6_000


def test_one_token_left_before_the_margin_is_still_no_room() -> None:
    with pytest.raises(BudgetError) as caught:
        derive_budget(
            context_window=7_001,
            system_prompt_tokens=2_000,
            user_message_tokens=1_000,
            output_headroom=4_000,
        )
    assert caught.value.over_by == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"context_window": 0}, "context_window must be from 1 to 100,000,000"),
        ({"context_window": -5}, "context_window must be from 1 to"),
        ({"context_window": 10**30}, "context_window must be from 1 to"),
        ({"system_prompt_tokens": -1}, "system_prompt_tokens must be from 0 to"),
        ({"output_headroom": -1}, "output_headroom must be from 0 to"),
        ({"output_headroom": 10**30}, "output_headroom must be from 0 to"),
        ({"safety_margin": 1.0}, r"safety_margin must be in \[0, 1\)"),
        ({"safety_margin": -0.1}, r"safety_margin must be in \[0, 1\)"),
    ],
)
def test_invalid_arguments(kwargs: dict[str, float], message: str) -> None:
    arguments: dict[str, float] = {
        "context_window": 10_000,
        "system_prompt_tokens": 0,
        "user_message_tokens": 0,
        "output_headroom": 0,
        "safety_margin": 0.1,
    }
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=message):
        derive_budget(**arguments)  # type: ignore[arg-type]


def test_validate_budget() -> None:
    assert validate_budget(1) == 1
    assert validate_budget(108_900) == 108_900
    assert validate_budget(MAX_BUDGET_TOKENS) == MAX_BUDGET_TOKENS
    for bad in (0, -1, MAX_BUDGET_TOKENS + 1, 10**30):
        with pytest.raises(ValueError, match="must be from 1 to 100,000,000"):
            validate_budget(bad)
    for wrong_type in (True, 1.5, "100"):
        with pytest.raises(ValueError, match="whole number"):
            validate_budget(wrong_type)  # type: ignore[arg-type]


def test_strategy_top_k_is_the_setting_for_a_small_budget() -> None:
    assert strategy_top_k(1000, 0.5, 50) == 50
    assert strategy_top_k(400, 0.5, 50, "compact") == 50


def test_strategy_top_k_grows_so_a_big_budget_can_be_filled() -> None:
    # the derived default budget (128k window) holds far more than 50 short memories
    assert strategy_top_k(108_900, 0.5, 50) == 3025
    assert strategy_top_k(108_900, 1.0, 50) == 6050
    assert strategy_top_k(108_900, 0.5, 50, "compact") == 6807


@pytest.mark.parametrize("style", ["default", "compact"])
def test_the_line_floor_is_below_every_real_memory_line(style: Style) -> None:
    """If a memory line could cost less than the floor, a big budget could be left with
    fewer candidates than would fit; check the shortest plausible one."""
    # a one-digit short id (models/store/memories/refs.py), one word, the shortest date
    record = mem("mem_0123456789abcdef01234567", content="Ana.", ref=1, importance=0.1)
    record = record.model_copy(update={"created_at": datetime(2026, 5, 1, tzinfo=UTC)})
    line = memory_line(record, style)
    for name in ("o200k_base", "cl100k_base"):
        assert len(get_encoding(name).encode_ordinary(line)) >= MIN_MEMORY_LINE_TOKENS[style]


def ask(**given: int | float) -> BudgetAsk:
    """What a call says of its budget: `given`, the rest left to the settings."""
    unset = dict.fromkeys(BudgetAsk.__dataclass_fields__)
    return BudgetAsk(**{**unset, **given})  # type: ignore[arg-type]


CONFIGURED = BudgetDefaults(
    budget_tokens=4_000,
    system_prompt_tokens=2_000,
    user_message_tokens=1_000,
    output_headroom=4_000,
    safety_margin=SAFETY_MARGIN,
)


def test_a_call_without_a_budget_gets_the_configured_one() -> None:
    assert resolve_budget(ask(), CONFIGURED) == 4_000
    # reservations alone, without a window, change nothing
    assert resolve_budget(ask(output_headroom=0), CONFIGURED) == 4_000


def test_a_given_budget_wins_and_is_validated() -> None:
    assert resolve_budget(ask(budget_tokens=500, context_window=128_000), CONFIGURED) == 500
    with pytest.raises(ValueError, match="budget_tokens"):
        resolve_budget(ask(budget_tokens=0), CONFIGURED)


def test_a_window_takes_each_reservation_from_the_call_or_the_settings() -> None:
    # all configured: the article's example
    assert resolve_budget(ask(context_window=128_000), CONFIGURED) == 108_900
    # each one the call gives replaces only its own
    given = ask(context_window=128_000, output_headroom=0, safety_margin=0.0)
    assert resolve_budget(given, CONFIGURED) == 128_000 - 2_000 - 1_000
    given = ask(context_window=10_000, system_prompt_tokens=0, user_message_tokens=0)
    assert resolve_budget(given, CONFIGURED) == derive_budget(
        context_window=10_000, system_prompt_tokens=0, user_message_tokens=0, output_headroom=4_000
    )
    with pytest.raises(BudgetError):
        resolve_budget(ask(context_window=7_000), CONFIGURED)
