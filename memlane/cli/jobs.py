"""`memlane jobs …` and `memlane packs …`: what happened to a transcript, and why a
context held what it held."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

import typer
from rich import box
from rich.table import Table

from memlane.cli.common import (
    AsJson,
    lane_session,
    print_json,
    report_job_outcomes,
    shown,
    stderr,
    stdout,
    wait_for_jobs,
)
from memlane.models.schemas import JobPublic, JobStatus

jobs_app = typer.Typer(help="Extraction jobs: list, show, retry.", no_args_is_help=True)
packs_app = typer.Typer(
    help="Context packs: what an assembly included and why.", no_args_is_help=True
)

JobId = Annotated[str, typer.Argument(help="A job id.", show_default=False)]


def _first_line(text: str | None, limit: int = 60) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


@jobs_app.command("list")
def list_jobs(
    status: Annotated[JobStatus | None, typer.Option(show_default=False)] = None,
    user: Annotated[str | None, typer.Option(show_default=False)] = None,
    limit: Annotated[int, typer.Option(min=1, max=10_000)] = 100,
    as_json: AsJson = False,
) -> None:
    """Jobs, newest first."""
    with lane_session() as lane:
        rows = lane.jobs(status=status, user_id=user, limit=limit)
    if as_json:
        print_json(rows)
        return
    # The id and status whole (an id must be copyable); the error's first line cut to
    # the room left, on one line (`jobs show` prints it whole).
    cells = [
        (
            job.id,
            job.user_id,
            job.status,
            job.stage,
            f"{job.window_start_seq}-{job.window_end_seq}",
            str(job.attempts),
        )
        for job in rows
    ]
    names = ("id", "user", "status", "stage", "msgs", "tries")
    widths = [max([len(name), *(len(row[i]) for row in cells)]) for i, name in enumerate(names)]
    widths[1] = min(widths[1], 16)  # a long user id is cut; the job id never is
    # Rich shrinks every column alike, ids included, when a row is too wide: the error
    # gets exactly the room the others leave (one space after each).
    room = max(8, stdout.width - sum(widths) - len(names))
    table = Table(title=f"{len(rows)} jobs", box=None, padding=(0, 1, 0, 0), pad_edge=False)
    for name, width in zip(names, widths, strict=True):
        table.add_column(name, no_wrap=True, overflow="ellipsis", width=width)
    table.add_column("error", no_wrap=True, overflow="ellipsis", max_width=room)
    for job, row in zip(rows, cells, strict=True):
        table.add_row(*row, shown(_first_line(job.last_error, limit=200)))
    stdout.print(table)


def _echo_job(job: JobPublic, as_json: bool) -> None:
    if as_json:
        print_json(job)
        return
    table = Table(show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in job.model_dump(mode="json").items():
        if key != "last_error":
            table.add_row(key, "" if value is None else shown(str(value)))
    stdout.print(table)
    if job.last_error:  # in full: it may carry the model's raw answer
        typer.echo("last_error:\n" + shown(job.last_error))


@jobs_app.command()
def show(job_id: JobId, as_json: AsJson = False) -> None:
    """One job, with its full last error."""
    with lane_session() as lane:
        _echo_job(lane.job(job_id), as_json)


@jobs_app.command()
def retry(
    job_id: JobId,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait", help="Wait for it; exit 1 if it fails again. Always on without a broker."
        ),
    ] = False,
    timeout: Annotated[float, typer.Option(help="Seconds --wait waits at most.")] = 600.0,
    as_json: AsJson = False,
) -> None:
    """Queue a failed job again at the stage it failed in (--json: the job, as it is after
    the wait when waited for)."""
    with lane_session() as lane:
        job = lane.retry_job(job_id)
        if not as_json:
            typer.echo(f"{job.id}: queued again at stage {job.stage}")
        code = 0
        if wait or lane.settings.embedded_worker:
            statuses = wait_for_jobs(lane, [job.id], timeout=timeout, label="retrying")
            code = report_job_outcomes(lane, statuses, timeout=timeout)
            job = lane.job(job.id)
        if as_json:
            print_json(job)
        if code:
            raise typer.Exit(code)


@jobs_app.command()
def sweep(as_json: AsJson = False) -> None:
    """Publish every queued job again (after the broker was down, say), release jobs
    stuck past MEMLANE_STUCK_AFTER_S, start idle conversations' tails and apply
    retention (MEMLANE_MESSAGE_RETENTION_DAYS, MEMLANE_PACK_RETENTION_DAYS): what beat's
    periodic sweep does, at once. A job published twice is run once. Prints the
    published job ids (--json: the sweep's counts and ids, and the jobs' statuses when
    this process ran them)."""
    with lane_session() as lane:
        result = lane.sweep()
        if not as_json:
            for job_id in [*result.extract, *result.store]:
                typer.echo(job_id)
        stderr.print(
            f"published {len(result.extract)} extract and {len(result.store)} store job(s), "
            f"{result.tails} of them new tails of idle conversations"
        )
        if lane.settings.message_retention_days or lane.settings.pack_retention_days:
            stderr.print(
                f"retention: {result.messages_purged} message text(s) purged, "
                f"{result.packs_deleted} context pack(s) deleted"
            )
        statuses: dict[str, str] | None = None
        code = 0
        if lane.settings.embedded_worker:  # this process is the worker
            statuses = wait_for_jobs(lane, [*result.extract, *result.store], timeout=600)
            code = report_job_outcomes(lane, statuses, timeout=600)
        if as_json:
            print_json({**dataclasses.asdict(result), "jobs": statuses})
        if code:
            raise typer.Exit(code)


# Reasons as short as the table's column; --json gives them whole.
_REASONS = {"over_memory_share": "share", "over_budget": "budget"}


def pack_table(pack: dict[str, Any]) -> Table:
    """One row per item the assembly considered, in the pack's order: the short id the
    context shows (whole, never wrapped), section, tier, score, tokens, in or out (and
    why: the drop reason, shortened), and the item's text folded in the room left."""
    reasons = ", ".join(f"{k} {v}" for k, v in sorted(pack.get("drop_reasons", {}).items()))
    table = Table(
        title=f"{pack['pack_id']}\n{pack['user_id']}: {pack['used_tokens']}/"
        f"{pack['budget_tokens']} tokens, {pack['dropped_count']} dropped"
        + (f" ({reasons})" if reasons else ""),
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        show_edge=False,
        padding=(0, 1, 0, 0),  # one space between columns leaves the text more room
    )
    table.add_column("item", justify="right", no_wrap=True)
    for name in ("section", "tier"):
        table.add_column(name, no_wrap=True)
    for name in ("score", "tokens"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("in/out", no_wrap=True)
    table.add_column("text", overflow="fold", ratio=1, min_width=16)
    for item in pack.get("items", []):
        score, tokens, reason = item.get("score"), item.get("tokens"), item.get("drop_reason")
        text = item.get("text")
        table.add_row(
            str(item["ref"]) if item.get("ref") is not None else item["id"].removeprefix("soul:"),
            item["section"],
            item.get("tier") or "",
            "" if score is None else f"{score:.3f}",
            "" if tokens is None else str(tokens),
            "in" if item["included"] else f"out: {_REASONS.get(reason, reason or '?')}",
            "(no longer stored)" if text is None else shown(text),
        )
    return table


@packs_app.command("show")
def show_pack(
    pack_id: Annotated[str, typer.Argument(help="A pack id (from assemble).", show_default=False)],
    as_json: AsJson = False,
) -> None:
    """Show a stored context pack: every item considered, with its section, tier, score
    and tokens, whether it went in and, if not, why, and its text.

    An item's text is read from the store now: a memory purged since shows none.
    """
    with lane_session() as lane:
        pack = lane.pack(pack_id, with_texts=True)
    if as_json:
        print_json(pack)
        return
    stdout.print(pack_table(pack))
