"""The inspector's playground: a context assembled for a question, budget, strategy and
style exactly as `Memlane.assemble` would, but recording nothing (no pack saved, no
access counted), with its pack laid out for reading."""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

from memlane.pipeline.assembly.budget import BudgetAsk
from memlane.pipeline.assembly.context_format import Style
from memlane.pipeline.errors import InvalidInputError
from memlane.pipeline.ranking.scoring import STRATEGIES, Strategy
from memlane.service.context_builder import ContextBuilder
from memlane.service.input_checks import check_text
from memlane.service.inspector.pack_view import PackView, texts_reader, view_of

STYLES: tuple[str, ...] = get_args(Style)
MAX_BUDGET = 200_000


@dataclass(frozen=True, slots=True)
class Trial:
    user_id: str
    query: str | None
    budget_tokens: int
    strategy: str
    style: str


def checked(trial: Trial) -> Trial:
    """The trial's fields checked, InvalidInputError naming the first wrong one."""
    check_text(trial.user_id, "user_id")
    if trial.query:
        check_text(trial.query, "query")
    if trial.strategy not in STRATEGIES:
        raise InvalidInputError(f"strategy: one of {', '.join(STRATEGIES)}")
    if trial.style not in STYLES:
        raise InvalidInputError(f"style: one of {', '.join(STYLES)}")
    if not 1 <= trial.budget_tokens <= MAX_BUDGET:
        raise InvalidInputError(f"budget: between 1 and {MAX_BUDGET} tokens")
    return trial


def run(contexts: ContextBuilder, trial: Trial, *, relevance_floor: float) -> PackView:
    """The trial's context (PackView.xml) and its pack; nothing is written."""
    trial = checked(trial)
    strategy: Strategy = trial.strategy  # type: ignore[assignment]
    style: Style = trial.style  # type: ignore[assignment]
    result = contexts.build(
        trial.user_id,
        trial.query or None,
        strategy=strategy,
        budget=BudgetAsk(
            budget_tokens=trial.budget_tokens,
            context_window=None,
            system_prompt_tokens=None,
            user_message_tokens=None,
            output_headroom=None,
            safety_margin=None,
        ),
        model=None,
        now=None,
        include_sensitive=False,
        query_embedding=None,
        weights=None,
        style=style,
        record=False,
    )
    reader = texts_reader(contexts.url, trial.user_id)
    return view_of(result.pack_data, reader, relevance_floor=relevance_floor, xml=result.text)
