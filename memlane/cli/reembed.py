"""`memlane reembed`: move the store to another embedder while it keeps serving."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from memlane.cli.common import FAILURE_EXIT, lane_session, stderr

POLL_S = 0.25


def reembed(
    to: Annotated[
        str | None,
        typer.Option(
            "--to",
            help="Target embedder: hashing, minilm or a litellm model "
            "(default: MEMLANE_EMBEDDING_MODEL).",
            show_default=False,
        ),
    ] = None,
    dim: Annotated[
        int | None,
        typer.Option(
            min=8, max=4096, help="Target dimension (litellm models, hashing).", show_default=False
        ),
    ] = None,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait",
            help="Wait with a progress bar (one step per user); exit 1 if a user is not done "
            "in time. Always on without a broker (this process does the work).",
        ),
    ] = False,
    timeout: Annotated[float, typer.Option(help="Seconds --wait waits at most.")] = 3600.0,
) -> None:
    """Re-embed every memory with another embedder, one task per user.

    Each user's old vectors keep serving until all of that user's new ones are ready;
    then one update swaps them. Set MEMLANE_EMBEDDING_MODEL to the target first (on every
    process), so new memories are embedded with it too; assembly serves both models
    meanwhile. Deleted memories are not re-embedded.
    """
    with lane_session() as lane:
        run = lane.reembed(to, dim=dim)
        configured = lane.embedder
        stderr.print(f"re-embedding {len(run.user_ids)} user(s) with {run.model} ({run.dim} dims)")
        if (configured.name, configured.dim) != (run.model, run.dim):
            stderr.print(
                f"note: MEMLANE_EMBEDDING_MODEL gives {configured.name}; memories stored from "
                f"now on are embedded with it, not {run.model}: set it to the target"
            )
        if not run.user_ids or not (wait or lane.settings.embedded_worker):
            return
        deadline = time.monotonic() + timeout
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("users"),
            TimeElapsedColumn(),
        )
        with Progress(*columns, console=stderr) as progress:
            task = progress.add_task("re-embedding", total=len(run.user_ids))
            while True:
                done = lane.reembed_done(run, wait_s=POLL_S)
                progress.update(task, completed=len(done))
                if len(done) == len(run.user_ids) or time.monotonic() >= deadline:
                    break
                if not lane.background_busy():
                    break  # the in-process worker finished; the rest failed
        missing = [u for u in run.user_ids if u not in done]
        if missing:
            shown = ", ".join(missing[:10]) + (" …" if len(missing) > 10 else "")
            typer.echo(
                f"error: {len(missing)} user(s) not re-embedded: {shown} "
                "(see the log, --debug; running memlane reembed again resumes them)",
                err=True,
            )
            raise typer.Exit(FAILURE_EXIT)
        typer.echo(f"{len(run.user_ids)} user(s) now serve {run.model}")
