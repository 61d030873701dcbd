"""What every CLI command shares: the error policy, the consoles, `--json`, a closed
pipe, opening the facade and waiting for jobs with a progress bar.

Exit codes: 0 ok; 1 the work failed (a job failed or timed out, BudgetError, NotFoundError,
any other memlane error, an unexpected error); 2 bad usage or bad input (TranscriptError,
ConfigurationError, ValueError — which includes pydantic's ValidationError — and Typer's
own usage errors). NotFoundError is 1, not 2: the command was well formed, the thing it
names is not there (as `grep` exits 1 when nothing matches). A reader that closes the pipe
early (`memlane … | head -1`) ends the command quietly with 141 (see closed_pipe_exits_quietly).
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import re
import select
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from typer._click.exceptions import NoArgsIsHelpError, UsageError  # typer vendors click
from typer.core import TyperGroup

from memlane.pipeline.errors import (
    ConfigurationError,
    MemlaneError,
    TranscriptError,
    problems_of,
)

if TYPE_CHECKING:
    # typer vendors click; its Context is what a group's invoke receives.
    from typer._click.core import Context as ClickContext

    from memlane.service.facade import Memlane

USAGE_EXIT = 2
FAILURE_EXIT = 1
# What a shell reports for a writer whose reader left (128 + SIGPIPE), as for `yes | head -1`.
READER_LEFT_EXIT = 141

# Rich wraps long lines at the terminal width; error lines are written with typer.echo so
# they stay one line whatever their length.
# markup off: memory contents and ids are printed as they are, brackets included.
stdout = Console(highlight=False, markup=False)
stderr = Console(stderr=True, highlight=False, markup=False)

# Every command that prints data takes it: one JSON document on stdout, nothing else there.
# Reads as an agent (memlane.pipeline.scope): the user's shared memories and its own.
Agent = Annotated[
    str | None,
    typer.Option(
        "--agent",
        help="As this agent: the user's shared memories and this agent's (default: the "
        "shared ones only).",
        show_default=False,
    ),
]
AsJson = Annotated[
    bool, typer.Option("--json", help="Print one JSON document on stdout instead of text.")
]
# A metadata filter's JSON text, handed to the facade as it is (its errors name the bad part)
FilterOption = Annotated[
    str | None,
    typer.Option(
        "--filter",
        help="Only memories (and episodes) whose metadata passes this JSON filter, e.g. "
        '\'{"team": "eng"}\' (docs/metadata.md).',
        show_default=False,
    ),
]


def print_json(value: Any) -> None:
    """`value` (plain data, or pydantic models inside it) as one indented JSON document."""
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False, default=_model_data))


def _model_data(value: Any) -> Any:
    if hasattr(value, "model_dump"):  # a pydantic model, as the API answers it
        return value.model_dump(mode="json")
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def shown(text: str) -> str:
    """`text` safe to print in a terminal: control characters (an escape sequence in a
    memory's content would recolour or rewrite the screen) written as `\\x1b`."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def one_line(exc: BaseException) -> str:
    """The error as one line: pydantic errors as `field: message; …`, others' first line."""
    if isinstance(exc, ValidationError):
        return problems_of(exc)  # the shape every door uses
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def exit_code_for(exc: BaseException) -> int:
    if isinstance(exc, TranscriptError | ConfigurationError | ValueError):
        return USAGE_EXIT
    return FAILURE_EXIT


def fail(message: str, code: int = FAILURE_EXIT) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def unwrapped(text: str) -> str:
    """Help text as paragraphs of one line each, for the terminal to wrap: Typer keeps a
    docstring's line breaks, so at 80 columns a sentence broke twice (a word alone on a
    line). Paragraphs stay apart; a line of its own ("\b" first) stays one."""
    return "\n\n".join(
        para if para.startswith("\b") else " ".join(para.split())
        for para in inspect.cleandoc(text).split("\n\n")
    )


def _no_type(ctx: object) -> None:
    return None


def tidy_help(command: Any) -> None:
    """Unwrap the help texts of `command` and every subcommand, and drop the `<bool>`
    Typer shows beside a flag: a flag takes no value, and the placeholder says it does."""
    for holder in (command, *command.params):
        if getattr(holder, "help", None):
            holder.help = unwrapped(holder.help)
    for param in command.params:
        if getattr(param, "is_flag", False):
            param.display_type_rich = _no_type
    made = command.get_help_option  # --help is made when help is shown

    def help_option(ctx: Any) -> Any:
        option = made(ctx)
        if option is not None:
            option.display_type_rich = _no_type
        return option

    command.get_help_option = help_option
    for sub in getattr(command, "commands", {}).values():
        tidy_help(sub)


class MemlaneGroup(TyperGroup):
    """The root command group: turns an error raised by any command into one line on
    stderr and its exit code, or re-raises it under --debug; tidies every command's help
    (see tidy_help) once, when Typer builds the group."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        tidy_help(self)

    def parse_args(self, ctx: ClickContext, args: list[str]) -> list[str]:
        # `--debug` after the subcommand too (`memlane assemble … --debug`), up to a `--`
        end = args.index("--") if "--" in args else len(args)
        if "--debug" in args[1:end]:
            args = ["--debug", *(a for i, a in enumerate(args) if a != "--debug" or i >= end)]
        return super().parse_args(ctx, args)

    def invoke(self, ctx: ClickContext) -> Any:
        try:
            return super().invoke(ctx)
        except NoArgsIsHelpError:  # a command given nothing: its help, as asked
            raise
        except UsageError as exc:  # a bad option or argument: one line, like every error
            if ctx.meta.get("memlane.debug"):
                raise
            where = exc.ctx.command_path if exc.ctx is not None else "memlane"
            message = " ".join(exc.format_message().replace("Value error, ", "").split())
            fail(f"{message} (see {where} --help)", USAGE_EXIT)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise
        except Exception as exc:
            if isinstance(exc, BrokenPipeError):
                exit_if_reader_left()  # else a socket's broken pipe: an error like any other
            if ctx.meta.get("memlane.debug"):
                raise
            if isinstance(exc, MemlaneError | ValueError):  # raised on purpose, self-explaining
                fail(one_line(exc), exit_code_for(exc))
            hint = database_hint(exc)
            if hint:
                fail(hint, FAILURE_EXIT)
            fail(f"{type(exc).__name__}: {one_line(exc)} (run with --debug)", exit_code_for(exc))


def _reader_gone(fd: int) -> bool:
    """Whether `fd` is a pipe whose reader has closed it: poll says so with POLLERR
    (Linux) or POLLHUP (BSD, macOS). Where poll is missing, a BrokenPipeError is believed."""
    if not hasattr(select, "poll"):
        return True
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(mask & (select.POLLERR | select.POLLHUP) for _, mask in poller.poll(0))


def exit_if_reader_left() -> None:
    """After a BrokenPipeError: when stdout's (or stderr's) reader closed the pipe, exit
    141 saying nothing, as Python's docs recommend (library/signal.html, "Note on SIGPIPE"):
    the closed descriptors now point at os.devnull, so the interpreter's last flush does
    not fail again. Returns when no standard stream is closed (a socket's broken pipe)."""
    gone = [fd for fd in (1, 2) if _reader_gone(fd)]
    if not gone:
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    for fd in gone:
        os.dup2(devnull, fd)
    raise SystemExit(READER_LEFT_EXIT)


def _identity(fd: int) -> tuple[int, int] | None:
    try:
        found = os.fstat(fd)
    except OSError:
        return None
    return (found.st_dev, found.st_ino)


@contextmanager
def closed_pipe_exits_quietly() -> Iterator[None]:
    """Around the whole CLI: a reader that leaves early (`memlane … | head -1`) ends it with
    141 and nothing on stderr, whoever met the closed pipe. A command's own write is
    MemlaneGroup's (exit_if_reader_left); rich's consoles (the tables, and the help Typer
    prints) follow the same recipe themselves but exit 1; the last flush is this one's."""
    devnull = os.stat(os.devnull)
    null = (devnull.st_dev, devnull.st_ino)
    started_null = _identity(1) == null
    try:
        yield
    except SystemExit as done:
        try:
            sys.stdout.flush()  # what a command wrote without flushing (assemble --batch)
        except BrokenPipeError:
            exit_if_reader_left()
            raise
        if done.code == 1 and not started_null and _identity(1) == null:
            raise SystemExit(READER_LEFT_EXIT) from None  # rich pointed stdout at devnull
        raise


_NO_DATABASE = re.compile(r'database "([^"]+)" does not exist')
_NO_SCHEMA = re.compile(r'relation "[^"]+" does not exist|no such table')
_REFUSED = re.compile(r"Connection refused|could not connect|connection failed|timeout expired")


def database_hint(exc: BaseException) -> str | None:
    """What to do about a database error a new deployment meets, or None."""
    text = str(exc)
    if missing := _NO_DATABASE.search(text):
        name = missing.group(1)
        return (
            f"the database {name!r} does not exist: create it (createdb {name}), then "
            "run `memlane db upgrade`"
        )
    if _NO_SCHEMA.search(text):
        return "the database has no memlane tables yet: run `memlane db upgrade`"
    if type(exc).__name__ == "OperationalError" and _REFUSED.search(text):
        return (
            "cannot reach the database of MEMLANE_DATABASE_URL: is PostgreSQL running and "
            f"the URL right? ({one_line(exc)})"
        )
    return None


def parse_now(value: str | None) -> datetime | None:
    """An ISO 8601 time; one without a zone is read as UTC."""
    return None if value is None else parse_time(value, "--now")


def parse_time(value: str, option: str) -> datetime:
    """An ISO 8601 time given to `option`; one without a zone is read as UTC."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{option}: not an ISO 8601 time: {value!r}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def open_lane(**overrides: Any) -> Memlane:
    """The facade on the settings from MEMLANE_* variables (and `overrides`). Imported here,
    not at module level, so `memlane --help` does not load the database layer."""
    from memlane.config.settings import load_settings
    from memlane.service.facade import Memlane

    _show_embedder_check()
    return Memlane(load_settings(**overrides), actor="cli")


def _show_embedder_check() -> None:
    """The facade's warning that the store holds another embedder's vectors (it names
    `memlane reembed`) as a `warning: …` line, without --debug; memlane's other log
    lines stay for --debug, which shows this one too."""
    from memlane.config.logging import StderrHandler
    from memlane.service.jobs import EMBEDDER_CHECK_LOG

    debug = any(getattr(h, "_memlane", False) for h in logging.getLogger("memlane").handlers)
    logger = logging.getLogger(EMBEDDER_CHECK_LOG)
    if debug or any(getattr(h, "_memlane_cli", False) for h in logger.handlers):
        return
    handler = StderrHandler()
    handler.setFormatter(logging.Formatter("warning: %(message)s"))
    handler._memlane_cli = True  # type: ignore[attr-defined]
    logger.addHandler(handler)


@contextmanager
def lane_session(**overrides: Any) -> Iterator[Memlane]:
    lane = open_lane(**overrides)
    try:
        yield lane
    finally:
        lane.close()  # saves the packs and runs the in-process worker's last items


FINISHED = ("done", "failed")


@contextmanager
def progress_bar(*, console: Console = stderr) -> Iterator[Progress]:
    """A started progress display on `console` (stderr) for tasks added with a `unit` field
    ("files", "jobs"). What is printed on stdout meanwhile goes to stdout (rich would send
    it through `console` unless stdout is the same terminal). After an error no bar is
    left above the error's one line; otherwise the last frame stays (a log keeps it)."""
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[unit]}"),
        TimeElapsedColumn(),
    )
    progress = Progress(*columns, console=console, redirect_stdout=_is_terminal(sys.stdout))
    progress.start()
    try:
        yield progress
    except BaseException:
        progress.live.transient = True
        progress.live.stop()  # not progress.stop(): off a terminal that adds an empty line
        raise
    if progress.live.is_started:  # a command may stop it before printing its last lines
        progress.stop()


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def wait_for_jobs(
    lane: Memlane,
    job_ids: Sequence[str],
    *,
    timeout: float,
    label: str = "extracting",
    console: Console = stderr,
    progress: Progress | None = None,
) -> dict[str, str]:
    """Wait for the jobs with a progress bar (finished / total), a task of `progress` when
    given (one display for a whole command), else its own; returns their statuses, some
    not finished when the timeout came first."""
    if not job_ids:
        return {}
    if progress is None:
        with progress_bar(console=console) as own:
            return wait_for_jobs(lane, job_ids, timeout=timeout, label=label, progress=own)
    deadline = time.monotonic() + timeout
    task = progress.add_task(label, total=len(job_ids), unit="jobs")
    while True:
        # The facade's wait runs the in-process worker while it waits; a short
        # timeout brings control back here to move the bar.
        statuses = lane.wait(job_ids, timeout=0.25, poll_s=0.1)
        finished = sum(status in FINISHED for status in statuses.values())
        progress.update(task, completed=finished)
        if finished == len(job_ids) or time.monotonic() >= deadline:
            return statuses


def report_job_outcomes(lane: Memlane, statuses: Mapping[str, str], *, timeout: float) -> int:
    """One stderr line per failed or unfinished job; the exit code they add up to."""
    code = 0
    for job_id, status in statuses.items():
        if status == "failed":
            error = lane.job(job_id).last_error or "no error recorded"
            typer.echo(f"error: job {job_id} failed: {error.splitlines()[0]}", err=True)
            code = FAILURE_EXIT
        elif status not in FINISHED:
            typer.echo(
                f"error: job {job_id} is still {status} after {timeout:g} s "
                "(is a worker running for the extract and store queues?)",
                err=True,
            )
            code = FAILURE_EXIT
    return code
