"""`memlane jobs …` and `memlane packs …`: what happened to a transcript, and why a
context held what it held."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from memlane.cli_common import (
    lane_session,
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
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


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
        typer.echo(json.dumps([j.model_dump(mode="json") for j in rows], indent=2))
        return
    table = Table(title=f"{len(rows)} jobs")
    table.add_column("id", no_wrap=True)
    for name in ("user", "status", "stage", "msgs", "tries"):
        table.add_column(name)
    table.add_column("error", overflow="fold")
    for job in rows:
        table.add_row(
            job.id,
            job.user_id,
            job.status,
            job.stage,
            f"{job.window_start_seq}-{job.window_end_seq}",
            str(job.attempts),
            shown(_first_line(job.last_error)),
        )
    stdout.print(table)


def _echo_job(job: JobPublic, as_json: bool) -> None:
    if as_json:
        typer.echo(job.model_dump_json(indent=2))
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
) -> None:
    """Queue a failed job again at the stage it failed in."""
    with lane_session() as lane:
        job = lane.retry_job(job_id)
        typer.echo(f"{job.id}: queued again at stage {job.stage}")
        if wait or lane.settings.embedded_worker:
            statuses = wait_for_jobs(lane, [job.id], timeout=timeout, label="retrying")
            code = report_job_outcomes(lane, statuses, timeout=timeout)
            if code:
                raise typer.Exit(code)


@jobs_app.command()
def sweep() -> None:
    """Publish every queued job again (after the broker was down, say), release jobs
    stuck past MEMLANE_STUCK_AFTER_S and start idle conversations' tails: what beat's
    periodic sweep does, at once. A job published twice is run once."""
    with lane_session() as lane:
        result = lane.sweep()
        for job_id in [*result.extract, *result.store]:
            typer.echo(job_id)
        stderr.print(
            f"published {len(result.extract)} extract and {len(result.store)} store job(s), "
            f"{result.tails} of them new tails of idle conversations"
        )
        if lane.settings.embedded_worker:  # this process is the worker
            statuses = wait_for_jobs(lane, [*result.extract, *result.store], timeout=600)
            code = report_job_outcomes(lane, statuses, timeout=600)
            if code:
                raise typer.Exit(code)


@packs_app.command("show")
def show_pack(
    pack_id: Annotated[str, typer.Argument(help="A pack id (from assemble).", show_default=False)],
) -> None:
    """Print a stored context pack as JSON.

    Every item considered, with its tier, score and tokens, whether it went in and, if
    not, why.
    """
    with lane_session() as lane:
        typer.echo(json.dumps(lane.pack(pack_id), indent=2, ensure_ascii=False))
