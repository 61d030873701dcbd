"""The `memlane` command line: the facade's operations for people and scripts.

Settings come from MEMLANE_* variables (and .env), as everywhere. Results go to stdout
(job ids, contexts; with --json, which every command printing data takes, one JSON
document), progress and errors to stderr; an error is one line `error: …` and an exit
code (see memlane/cli/common.py), with a traceback under --debug.
Heavy modules (the facade, SQLAlchemy, Celery, litellm) are imported inside commands, so
`memlane --help` and `memlane assemble` start quickly.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from memlane.cli import assemble as cli_assemble
from memlane.cli import items as cli_items
from memlane.cli import jobs as cli_jobs
from memlane.cli import keys as cli_keys
from memlane.cli import mcp as cli_mcp
from memlane.cli import memories as cli_memories
from memlane.cli import ops as cli_ops
from memlane.cli import reembed as cli_reembed
from memlane.cli import search as cli_search
from memlane.cli import users as cli_users
from memlane.cli import webhooks as cli_webhooks
from memlane.cli.common import (
    AsJson,
    MemlaneGroup,
    closed_pipe_exits_quietly,
    lane_session,
    print_json,
    progress_bar,
    report_job_outcomes,
    wait_for_jobs,
)

if TYPE_CHECKING:
    from rich.progress import Progress

    from memlane.cli.transcript_files import SourcedTranscript
    from memlane.models.schemas import EnqueueResult
    from memlane.service.facade import Memlane

app = typer.Typer(
    cls=MemlaneGroup,
    name="memlane",
    help="Long-term memory for LLM chat apps: enqueue transcripts, assemble contexts.",
    epilog="Settings: MEMLANE_* variables (or .env). Exit codes: 0 ok; 1 the work failed "
    "(a job failed, a budget too small, an id not found); 2 bad usage or bad input.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,  # locals may hold transcripts and keys
)


def _version(show: bool) -> None:
    if show:
        from importlib.metadata import version

        typer.echo(f"memlane {version('memlane')}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug", help="Show tracebacks and memlane's log lines (anywhere on the line)."
        ),
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print memlane's version."
        ),
    ] = False,
) -> None:
    ctx.meta["memlane.debug"] = debug
    if debug:
        from memlane.config.logging import configure_logging

        configure_logging("DEBUG")
    else:
        # The CLI reports failures itself, once; without a handler Python would print
        # the in-process worker's warnings and tracebacks too.
        logging.getLogger("memlane").addHandler(logging.NullHandler())


def enqueue(
    paths: Annotated[
        list[str],
        typer.Argument(
            help="JSON or JSONL files, folders of them, or - for stdin.", show_default=False
        ),
    ],
    final: Annotated[
        bool, typer.Option("--final", help="Mark the transcripts final: extract their tails now.")
    ] = False,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait",
            help="Wait for the jobs with a progress bar; exit 1 if any fails. "
            "Always on without a broker (the jobs run in this process).",
        ),
    ] = False,
    timeout: Annotated[float, typer.Option(help="Seconds --wait waits at most.")] = 600.0,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            help="The agent the conversations are with, for transcripts that name none "
            "(their agent_id).",
            show_default=False,
        ),
    ] = None,
    as_json: AsJson = False,
) -> None:
    """Store transcripts and queue their extraction jobs; prints the job ids (--json: each
    transcript's result and, when waited for, the jobs' statuses).

    Every input is validated, then all are stored in one transaction: one bad file or
    line, or one that contradicts what is stored, and nothing is enqueued (exit 2).
    A progress bar on stderr follows reading, storing and (when waited for) the jobs.
    """
    # The bar starts before anything is read: a folder of thousands of transcripts
    # takes seconds to read and store before the first job exists.
    with progress_bar() as bar:
        found = _read_all(paths, final=final, bar=bar, agent=agent)
        storing = bar.add_task("storing", total=len(found), unit="transcripts")
        bar.refresh()
        with lane_session() as lane:
            results = _store(lane, found, lambda n: bar.update(storing, completed=n))
            job_ids = [job_id for result in results for job_id in result.job_ids]
            if not as_json:
                for job_id in job_ids:
                    typer.echo(job_id)
            _summarise(bar, found, results)
            statuses: dict[str, str] | None = None
            # Without a broker this process is the worker: leaving now would strand the jobs.
            if wait or lane.settings.embedded_worker:
                statuses = wait_for_jobs(lane, job_ids, timeout=timeout, progress=bar)
            bar.stop()
            code = report_job_outcomes(lane, statuses, timeout=timeout) if statuses else 0
            if as_json:
                print_json(_enqueue_json(found, results, statuses))
    if code:
        raise typer.Exit(code)


def _enqueue_json(
    found: list[SourcedTranscript],
    results: list[EnqueueResult],
    statuses: dict[str, str] | None,
) -> dict[str, object]:
    return {
        "transcripts": len(found),
        "stored_messages": sum(result.stored_messages for result in results),
        "skipped_messages": sum(result.skipped_messages for result in results),
        "job_ids": [job_id for result in results for job_id in result.job_ids],
        "results": [  # one per transcript, as POST /v1/transcripts answers, and its source
            {"source": item.source, **result.model_dump(mode="json")}
            for item, result in zip(found, results, strict=True)
        ],
        "jobs": statuses,  # the jobs' statuses after waiting; null when not waited for
    }


def _read_all(
    paths: list[str], *, final: bool, bar: Progress, agent: str | None = None
) -> list[SourcedTranscript]:
    """Every input read and validated (transcript_files), one step of the bar per file;
    `agent` given to those that name none."""
    reading = bar.add_task("reading", total=None, unit="files")
    bar.refresh()  # shown now, before the imports below
    from memlane.cli.transcript_files import expand_paths, read_transcripts

    sources = expand_paths(paths)
    bar.update(reading, total=len(sources))
    found: list[SourcedTranscript] = []
    for source in sources:
        found.extend(read_transcripts([source], stdin=sys.stdin, final=final, agent=agent))
        bar.advance(reading)
    return found


def _store(
    lane: Memlane, found: list[SourcedTranscript], on_stored: Callable[[int], None]
) -> list[EnqueueResult]:
    from memlane.pipeline.errors import TranscriptError

    try:
        return lane.enqueue_many([item.transcript for item in found], on_stored=on_stored)
    except TranscriptError as exc:  # contradicts the store: name its file or line
        at = re.match(r"transcript (\d+) of the batch: ", str(exc))
        where = found[int(at.group(1))].source if at else found[0].source
        raise TranscriptError(f"{where}: {exc}") from None


def _summarise(bar: Progress, found: list[SourcedTranscript], results: list[EnqueueResult]) -> None:
    """What was stored and why a transcript made no job, on stderr above the bar."""
    say = bar.console.print
    stored = sum(result.stored_messages for result in results)
    skipped = sum(result.skipped_messages for result in results)
    jobs = sum(len(result.job_ids) for result in results)
    say(
        f"enqueued {len(found)} transcript(s): {stored} message(s) stored, "
        f"{skipped} already known, {jobs} job(s)"
    )
    reasons = [r for r in results if r.no_job_reason]
    for result in reasons[:5]:
        say(f"no job for {result.conversation_id}: {result.no_job_reason}")
    if len(reasons) > 5:
        say(f"… and {len(reasons) - 5} more transcript(s) with no job")
    ignored: dict[str, int] = {}
    for result in results:
        for name, times in result.ignored_fields.items():
            ignored[name] = ignored.get(name, 0) + times
    if ignored:
        listed = ", ".join(f"{name} ×{times}" for name, times in sorted(ignored.items()))
        say(f"ignored (not read): {listed}", markup=False)


def demo(
    db: Annotated[Path, typer.Option(help="SQLite file to (re)create for the demo.")] = Path(
        "memlane-demo.db"
    ),
    query: Annotated[
        str, typer.Option("--query", "-q", help="The sample query assembled for each user.")
    ] = "What stack and tools does the user prefer?",
    budget: Annotated[int, typer.Option(help="Token budget of each context.")] = 1500,
) -> None:
    """Run the embedded default end to end, with no services.

    Ingests the example transcripts into a fresh SQLite file with an in-process worker,
    then shows each user's memories and the context assembled for a sample query.
    """
    from memlane.cli.demo import run_demo

    raise typer.Exit(run_demo(db, query=query, budget=budget))


# In the order `memlane --help` lists them.
app.command("demo")(demo)
app.command("enqueue")(enqueue)
app.command("assemble", no_args_is_help=True)(cli_assemble.assemble)
app.command("search", no_args_is_help=True)(cli_search.search)
app.add_typer(cli_memories.app, name="memories")
app.add_typer(cli_items.soul_app, name="soul")
app.add_typer(cli_items.procedures_app, name="procedures")
app.add_typer(cli_jobs.jobs_app, name="jobs")
app.add_typer(cli_jobs.packs_app, name="packs")
app.add_typer(cli_ops.db_app, name="db")
app.add_typer(cli_users.app, name="users")
app.add_typer(cli_webhooks.app, name="webhooks")
app.add_typer(cli_keys.app, name="keys")
app.command("sweep")(cli_jobs.sweep)  # `memlane jobs sweep`, where retention looks for it
app.command("reembed")(cli_reembed.reembed)
app.command("worker")(cli_ops.worker)
app.command("serve")(cli_ops.serve)
app.command("mcp")(cli_mcp.mcp)
app.command("status")(cli_ops.status)


def main() -> None:
    with closed_pipe_exits_quietly():
        app()


if __name__ == "__main__":
    main()
