"""`memlane assemble`: one context, or a batch of them in one process (`--batch`).

The hot path of a chat app, so this module and what it loads stay light: no litellm, no
Celery (with the embedded default; with a broker the access record is published through
Celery, which loads it).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TextIO

import typer
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from memlane.cli.common import (
    Agent,
    FilterOption,
    fail,
    lane_session,
    one_line,
    parse_now,
    print_json,
    stderr,
)
from memlane.models.schemas import StoredText, UserIdIn
from memlane.pipeline.assembly.budget import MAX_BUDGET_TOKENS
from memlane.pipeline.assembly.context_format import Style
from memlane.pipeline.errors import MemlaneError
from memlane.pipeline.ranking.scoring import Strategy

if TYPE_CHECKING:
    from memlane.pipeline.assembly.records import AssembledContext
    from memlane.service.facade import Memlane

Format = Literal["xml", "json"]


class BatchQuery(BaseModel):
    """One line of a --batch file. Missing fields take the command line's values; `id`
    and `question_id` (a caller's own keys, e.g. a benchmark's) come back on the line's
    output as given."""

    model_config = ConfigDict(extra="forbid")

    id: str | int | None = None
    question_id: str | int | None = None
    user_id: UserIdIn
    query: StoredText | None = None
    budget: int | None = Field(None, ge=1, le=MAX_BUDGET_TOKENS)
    context_window: int | None = Field(None, ge=1, le=MAX_BUDGET_TOKENS)
    strategy: Strategy | None = None
    style: Style | None = None
    now: datetime | None = None
    agent_id: UserIdIn | None = None

    @field_validator("now")
    @classmethod
    def _utc_when_naive(cls, value: datetime | None) -> datetime | None:
        return value.replace(tzinfo=UTC) if value and value.tzinfo is None else value

    @model_validator(mode="after")
    def _one_budget(self) -> BatchQuery:
        if self.budget is not None and self.context_window is not None:
            raise ValueError("give budget or context_window, not both")
        return self


def assemble(
    user: Annotated[str | None, typer.Option(help="The user whose context to build.")] = None,
    query: Annotated[
        str | None, typer.Option("--query", "-q", help="The user's next message.")
    ] = None,
    budget: Annotated[
        int | None,
        typer.Option(
            min=1, max=MAX_BUDGET_TOKENS, help="Token budget of the context.", show_default=False
        ),
    ] = None,
    context_window: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=MAX_BUDGET_TOKENS,
            help="Derive the budget from the model's context window (minus system prompt, "
            "user message, output headroom, then the safety margin).",
            show_default=False,
        ),
    ] = None,
    strategy: Annotated[Strategy, typer.Option(help="How memories are ranked.")] = "scored",
    style: Annotated[
        Style | None,
        typer.Option(
            help="The context's format: default, or compact (ids and content only) for tight "
            "budgets. Default: MEMLANE_CONTEXT_STYLE.",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print one JSON document: the context, its JSON form and the pack. "
            "(--batch writes JSON lines either way.)",
        ),
    ] = False,
    output_format: Annotated[
        Format | None,
        typer.Option("--format", hidden=True, help="Deprecated: --format json is --json."),
    ] = None,
    now: Annotated[
        str | None, typer.Option(help="Assemble as of this ISO 8601 time (default: now).")
    ] = None,
    batch: Annotated[
        Path | None,
        typer.Option(
            help="JSONL file, one query per line {user_id, query, budget, strategy, style, "
            "context_window, now, agent_id, id, question_id}; writes one JSON object per line, "
            "with the line's id and question_id.",
            dir_okay=False,
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="With --batch: write the results here, not stdout.")
    ] = None,
    agent: Agent = None,
    where: FilterOption = None,
) -> None:
    """Build the context block for a user's next model call.

    Without --budget or --context-window the configured default budget applies. The
    context (or, with --json, one JSON document) goes to stdout, the pack summary to stderr.
    """
    if budget is not None and context_window is not None:
        raise ValueError("give --budget or --context-window, not both")
    if output_format is not None:  # the option --json replaced; kept so scripts keep working
        stderr.print("note: --format is deprecated: give --json for JSON, nothing for XML")
        as_json = as_json or output_format == "json"
    at = parse_now(now)
    if batch is not None:
        if user is not None or query is not None or where is not None:
            raise ValueError(
                "--batch takes users and queries from the file; drop --user/--query/--filter"
            )
        _run_batch(batch, out, budget, context_window, strategy, style, at, agent)
        return
    if out is not None:
        raise ValueError("--out goes with --batch")
    if user is None:
        raise ValueError("--user is required (or --batch FILE)")
    with lane_session() as lane:
        result = lane.assemble(
            user,
            query,
            strategy=strategy,
            budget_tokens=budget,
            context_window=context_window,
            now=at,
            style=style,
            agent_id=agent,
            filter=where,
        )
    if as_json:
        print_json(_as_json(result))
    else:
        typer.echo(result.text, nl=not result.text.endswith("\n"))
    pack = result.pack
    typer.echo(
        f"pack {pack.pack_id}: {pack.used_tokens}/{pack.budget_tokens} tokens, "
        f"{pack.dropped_count} dropped, retrieval {pack.retrieval_mode}",
        err=True,
    )


def _as_json(result: AssembledContext) -> dict[str, Any]:
    return {
        "context": result.text,
        "json": result.json,
        "pack": result.pack.model_dump(mode="json"),
    }


def read_batch(path: Path) -> list[tuple[int, BatchQuery]]:
    """(line number, query) for each non-blank line, all validated before the first
    assembly; a bad line is named by its number."""
    queries: list[tuple[int, BatchQuery]] = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                queries.append((number, BatchQuery.model_validate_json(line)))
            except ValidationError as exc:
                raise ValueError(f"{path} line {number}: {one_line(exc)}") from None
    if not queries:
        raise ValueError(f"{path}: no queries")
    return queries


@contextmanager
def _output(out: Path | None) -> Iterator[TextIO]:
    if out is None:
        yield sys.stdout
        return
    with out.open("w", encoding="utf-8") as stream:
        yield stream


def _run_batch(
    path: Path,
    out: Path | None,
    budget: int | None,
    context_window: int | None,
    strategy: Strategy,
    style: Style | None,
    now: datetime | None,
    agent: str | None,
) -> None:
    """One JSON object per query line: {line, [id, question_id,] user_id, query, context,
    json, pack}, or {line, …, error: {code, message}} for a query that failed (the others
    still run; exit 1 at the end)."""
    queries = read_batch(path)
    failed = 0
    with lane_session() as lane, _output(out) as stream:
        for number, item in queries:
            keys = {k: v for k in ("id", "question_id") if (v := getattr(item, k)) is not None}
            row: dict[str, Any] = {
                "line": number,
                **keys,
                "user_id": item.user_id,
                "query": item.query,
            }
            try:
                result = _assemble_one(
                    lane, item, budget, context_window, strategy, style, now, agent
                )
                row.update(_as_json(result))
            except MemlaneError as exc:
                failed += 1
                row["error"] = {"code": exc.code, "message": one_line(exc)}
            stream.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")
    stderr.print(f"{len(queries)} queries, {failed} failed")
    if failed:
        fail(f"{failed} of {len(queries)} queries failed (see their error objects)")


def _assemble_one(
    lane: Memlane,
    item: BatchQuery,
    budget: int | None,
    context_window: int | None,
    strategy: Strategy,
    style: Style | None,
    now: datetime | None,
    agent: str | None = None,
) -> AssembledContext:
    own_budget = item.budget is not None or item.context_window is not None
    return lane.assemble(
        item.user_id,
        item.query,
        strategy=item.strategy or strategy,
        budget_tokens=item.budget if own_budget else budget,
        context_window=item.context_window if own_budget else context_window,
        now=item.now or now,
        style=item.style or style,
        agent_id=item.agent_id or agent,
    )
