"""The token budget of a context block.

budget = floor((context_window − system_prompt − user_message − output_headroom)
               × (1 − safety_margin))

The article's example: 128,000 − 2,000 − 1,000 − 4,000 = 121,000, then a 10% margin
→ 108,900. The margin is applied with exact decimal arithmetic, so 0.1 means one tenth
and a budget is never one token short because of a binary float.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from fractions import Fraction

from memlane.pipeline.errors import BudgetError

# Far above any model's context window (a few million tokens at most): a larger number is
# a mistake, and would not fit the store's integers.
MAX_BUDGET_TOKENS = 100_000_000


def validate_budget(budget_tokens: int) -> int:
    """A given budget: a whole number of tokens, from 1 to MAX_BUDGET_TOKENS."""
    if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int):
        raise ValueError(f"budget_tokens must be a whole number of tokens, not {budget_tokens!r}")
    if not 0 < budget_tokens <= MAX_BUDGET_TOKENS:
        raise ValueError(
            f"budget_tokens must be from 1 to {MAX_BUDGET_TOKENS:,}, not {budget_tokens:,}"
        )
    return budget_tokens


def derive_budget(
    *,
    context_window: int,
    system_prompt_tokens: int,
    user_message_tokens: int,
    output_headroom: int,
    safety_margin: float,
) -> int:
    """The context budget left by a model call (formula in the module docstring).

    ValueError for a non-positive window, negative reservations or a margin outside
    [0, 1); BudgetError when the reservations leave no token for the context.
    """
    if not 0 < context_window <= MAX_BUDGET_TOKENS:
        raise ValueError(
            f"context_window must be from 1 to {MAX_BUDGET_TOKENS:,}, not {context_window:,}"
        )
    reserved = {
        "system_prompt_tokens": system_prompt_tokens,
        "user_message_tokens": user_message_tokens,
        "output_headroom": output_headroom,
    }
    for name, value in reserved.items():
        if not 0 <= value <= MAX_BUDGET_TOKENS:
            raise ValueError(f"{name} must be from 0 to {MAX_BUDGET_TOKENS:,}, not {value:,}")
    if not 0.0 <= safety_margin < 1.0:
        raise ValueError(f"safety_margin must be in [0, 1), not {safety_margin!r}")
    keep = 1 - Fraction(str(safety_margin))
    required = sum(reserved.values())
    remaining = context_window - required
    budget = math.floor(remaining * keep) if remaining > 0 else 0
    if budget <= 0:
        raise BudgetError(
            f"no room for a context: the context window is {context_window:,} tokens and "
            f"system prompt {system_prompt_tokens:,} + user message {user_message_tokens:,} "
            f"+ output headroom {output_headroom:,} leave {max(remaining, 0):,} "
            f"before the {safety_margin:.0%} safety margin",
            budget=context_window,
            # the smallest window that would leave a one-token budget
            required=required + math.ceil(1 / keep),
        )
    return budget


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetAsk:
    """What one call says of its budget: a budget, or a context window and what it
    reserves; each None is the configured value (`BudgetDefaults`). No defaults here:
    the caller says None (memlane.config.settings holds the values)."""

    budget_tokens: int | None
    context_window: int | None
    system_prompt_tokens: int | None
    user_message_tokens: int | None
    output_headroom: int | None
    safety_margin: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetDefaults:
    """The configured budget and reservations (settings), for what a call leaves out."""

    budget_tokens: int
    system_prompt_tokens: int
    user_message_tokens: int
    output_headroom: int
    safety_margin: float


_RESERVATIONS = tuple(f.name for f in fields(BudgetDefaults) if f.name != "budget_tokens")


def resolve_budget(ask: BudgetAsk, defaults: BudgetDefaults) -> int:
    """The budget of one call: its `budget_tokens` (`validate_budget`); else, with a
    `context_window`, `derive_budget` of it, each reservation the call's or the
    configured one; else the configured budget."""
    if ask.budget_tokens is not None:
        return validate_budget(ask.budget_tokens)
    if ask.context_window is None:
        return defaults.budget_tokens
    given = {name: value for name in _RESERVATIONS if (value := getattr(ask, name)) is not None}
    reserved = replace(defaults, **given)
    return derive_budget(
        context_window=ask.context_window,
        system_prompt_tokens=reserved.system_prompt_tokens,
        user_message_tokens=reserved.user_message_tokens,
        output_headroom=reserved.output_headroom,
        safety_margin=reserved.safety_margin,
    )


# Fewer tokens than any memory line of a style costs: the markup alone with a short id
# (`<m id="1" importance="low" date="1 May 2026">…</m>`), and a compact line with a
# one-word content (`<m id="1">Ana.</m>`), in o200k_base and cl100k_base. A sizing
# rule, not a bound: the budget is still enforced line by line.
MIN_MEMORY_LINE_TOKENS: dict[str, int] = {"default": 18, "compact": 8}


def strategy_top_k(
    budget_tokens: int, memory_share: float, configured: int, style: str = "default"
) -> int:
    """Memories to read per strategy order: `configured`, or more when the memories'
    share of the budget could hold more lines than that, so a big budget is not left
    half empty for want of candidates (108,900 tokens × 0.5 → 3,025 default lines)."""
    fits = math.ceil(budget_tokens * memory_share / MIN_MEMORY_LINE_TOKENS[style])
    return max(configured, fits)
