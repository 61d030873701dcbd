"""`memlane reembed`: move the store to another embedder while it keeps serving."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated

import typer

from memlane.cli.common import (
    FAILURE_EXIT,
    AsJson,
    lane_session,
    print_json,
    progress_bar,
    stderr,
)

if TYPE_CHECKING:
    from memlane.service.facade import Memlane
    from memlane.service.jobs import ReembedRun

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
    as_json: AsJson = False,
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
        done: set[str] | None = None
        if run.user_ids and (wait or lane.settings.embedded_worker):
            done = _wait(lane, run, timeout)
        missing = [u for u in run.user_ids if done is not None and u not in done]
        if as_json:  # done: null when not waited for
            print_json(
                {
                    "model": run.model,
                    "dim": run.dim,
                    "user_ids": list(run.user_ids),
                    "done": None if done is None else sorted(done),
                    "missing": missing,
                }
            )
        if missing:
            shown = ", ".join(missing[:10]) + (" …" if len(missing) > 10 else "")
            typer.echo(
                f"error: {len(missing)} user(s) not re-embedded: {shown} "
                "(see the log, --debug; running memlane reembed again resumes them)",
                err=True,
            )
            raise typer.Exit(FAILURE_EXIT)
        if done is not None and not as_json:
            typer.echo(f"{len(run.user_ids)} user(s) now serve {run.model}")


def _wait(lane: Memlane, run: ReembedRun, timeout: float) -> set[str]:
    """The users whose new vectors serve, when all do, the timeout comes or the
    in-process worker is idle with some not done (they failed)."""
    deadline = time.monotonic() + timeout
    with progress_bar() as bar:
        task = bar.add_task("re-embedding", total=len(run.user_ids), unit="users")
        while True:
            done = lane.reembed_done(run, wait_s=POLL_S)
            bar.update(task, completed=len(done))
            if len(done) == len(run.user_ids) or time.monotonic() >= deadline:
                return done
            if not lane.background_busy():
                return done  # the in-process worker finished; the rest failed
