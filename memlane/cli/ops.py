"""Operations: `memlane db upgrade` and `db revision`, `memlane worker`, `memlane serve`
and `memlane status`."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Annotated, Literal

import typer

from memlane.cli.common import AsJson, print_json
from memlane.config.queues import Queue

db_app = typer.Typer(help="The database schema.", no_args_is_help=True)

Pool = Literal["prefork", "threads", "solo"]
ALL_QUEUES = ",".join(q.value for q in Queue)
# The extract queue waits on the LLM's network round trips: many threads, little CPU.
EXTRACT_POOL: Pool = "threads"
EXTRACT_CONCURRENCY = 32


@db_app.command()
def upgrade(as_json: AsJson = False) -> None:
    """Migrate the database to the latest schema and print its revision; on PostgreSQL,
    also build the configured embedder's HNSW index (MEMLANE_VECTOR_INDEX, default auto:
    every embedder but hashing). With --json the steps go to stderr and stdout gets
    {database, from_revision, revision, vector_indexes}.

    The database is MEMLANE_DATABASE_URL (the default SQLite file when unset).
    """
    from dataclasses import asdict

    from memlane.config.settings import load_settings
    from memlane.service import schema

    done = schema.upgrade(load_settings(), say=lambda line: typer.echo(line, err=as_json))
    if as_json:
        print_json(asdict(done))


@db_app.command()
def revision(
    message: Annotated[str, typer.Option("--message", "-m", help="what the migration does")],
    autogenerate: Annotated[
        bool,
        typer.Option(
            "--autogenerate/--empty",
            help="write the differences between memlane.models.tables and the database "
            "(which must be at the latest revision)",
        ),
    ] = False,
    migrations: Annotated[
        Path | None,
        typer.Option(help="the migrations folder (default: the package's)", hidden=True),
    ] = None,
    as_json: AsJson = False,
) -> None:
    """Write the next migration file (memlane/models/migrations/versions/NNNN_<message>.py)
    and print its path: empty, or with --autogenerate what the tables changed.

    Then list it in the README's upgrade notes; see "Where to change what". The database
    compared is MEMLANE_DATABASE_URL (the default SQLite file when unset).
    """
    from memlane.config.settings import load_settings
    from memlane.models import migrate

    url = load_settings().resolved_database_url
    path = migrate.new_revision(
        message,
        url=url,
        autogenerate=autogenerate,
        migrations=migrations or migrate.MIGRATIONS,
    )
    if as_json:
        print_json({"path": str(path)})
    else:
        typer.echo(str(path))


def parse_queues(value: str) -> list[str]:
    names = [part.strip() for part in value.split(",") if part.strip()]
    known = {q.value for q in Queue}
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise ValueError(
            f"--queues: unknown queue {', '.join(unknown) or '(none given)'}; "
            f"choose from {ALL_QUEUES}"
        )
    return list(dict.fromkeys(names))


def worker_command(
    queues: list[str],
    *,
    pool: Pool | None,
    concurrency: int | None,
    beat: bool,
    loglevel: str,
) -> list[str]:
    """The `celery worker` command line. A worker that serves the extract queue defaults to
    a thread pool of 32 (LLM calls wait on the network); others to prefork with Celery's
    default concurrency (one process per CPU)."""
    serves_extract = Queue.EXTRACT.value in queues
    pool = pool or (EXTRACT_POOL if serves_extract else "prefork")
    if concurrency is None and serves_extract and pool == EXTRACT_POOL:
        concurrency = EXTRACT_CONCURRENCY
    command = [sys.executable, "-m", "celery", "-A", "memlane.workers.app", "worker"]
    command += ["-Q", ",".join(queues), "-E", "-P", pool, "-l", loglevel]
    # A node name per queue set, so several workers can run on one host.
    command += ["-n", f"memlane-{'-'.join(queues)}@%h"]
    if concurrency is not None:
        command += ["-c", str(concurrency)]
    if beat:
        command.append("-B")
    return command


def worker(
    queues: Annotated[str, typer.Option(help="Comma-separated queues to consume.")] = ALL_QUEUES,
    pool: Annotated[
        Pool | None,
        typer.Option(
            help="Celery pool (default: threads with the extract queue, else prefork).",
            show_default=False,
        ),
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(
            min=1, help="Pool size (default: 32 threads for extract).", show_default=False
        ),
    ] = None,
    beat: Annotated[
        bool, typer.Option("--beat", help="Also run beat (the stuck-job sweep) in this worker.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the celery command instead of running it.")
    ] = False,
) -> None:
    """Run a Celery worker for memlane's queues (needs MEMLANE_BROKER_URL)."""
    from memlane.config.settings import load_settings
    from memlane.config.startup import require_database
    from memlane.pipeline.errors import ConfigurationError

    settings = load_settings()
    command = worker_command(
        parse_queues(queues),
        pool=pool,
        concurrency=concurrency,
        beat=beat,
        loglevel=settings.log_level,
    )
    if dry_run:
        typer.echo(shlex.join(command))
        return
    if settings.broker_url is None:
        raise ConfigurationError(
            "MEMLANE_BROKER_URL is not set: a Celery worker needs a broker (redis://…); "
            "without one, enqueue runs the jobs in its own process"
        )
    require_database(settings, "a memlane worker")  # celery's own check, before the exec
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(command[0], command)


def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535)] = 8000,
    allow_unauthenticated: Annotated[
        bool,
        typer.Option(
            "--allow-unauthenticated",
            help="Listen on a non-loopback address without MEMLANE_API_KEYS (when something "
            "in front checks who calls); also MEMLANE_ALLOW_UNAUTHENTICATED=true.",
        ),
    ] = False,
) -> None:
    """Run the HTTP API (memlane.api.app) with uvicorn, on MEMLANE_DATABASE_URL (which must
    be set). On an address other than loopback it needs keys (MEMLANE_API_KEYS, or keys
    made with `memlane keys create`), or --allow-unauthenticated."""
    import uvicorn

    from memlane.config import startup
    from memlane.config.logging import configure_logging
    from memlane.config.settings import load_settings

    settings = load_settings()  # a bad setting fails here, in one line, not in uvicorn
    startup.require_database(settings, "memlane serve")
    if not (startup.is_loopback(host) or settings.api_keys):
        from memlane.service.keys.keyring import stored_keys_guard

        # keys made with `memlane keys create` close the API as MEMLANE_API_KEYS does
        allow_unauthenticated = allow_unauthenticated or stored_keys_guard(
            settings.resolved_database_url
        )
    startup.require_auth(
        settings,
        host,
        "memlane serve",
        allowed=allow_unauthenticated or settings.allow_unauthenticated,
    )
    configure_logging(settings.log_level)
    uvicorn.run(
        "memlane.api.app:create_app",
        factory=True,
        host=host,
        port=port,
        log_level=settings.log_level.lower(),
        access_log=False,  # memlane.api.access_log's lines name the key; uvicorn's cannot
    )


def status(as_json: AsJson = False) -> None:
    """Whether workers answer for each queue (a 1 s broadcast) and how many messages
    wait in each: ok (exit 0) or degraded (exit 1), with the problems.

    Reads MEMLANE_BROKER_URL only; the database is `memlane db upgrade`'s and /readyz's.
    """
    from rich.table import Table

    from memlane.cli.common import stdout
    from memlane.config.settings import load_settings
    from memlane.service.fleet_status import fleet_status

    report = fleet_status(load_settings())
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
    else:
        table = Table(title=f"fleet: {report.status} (broker: {report.broker})")
        for column in ("queue", "workers", "waiting"):
            table.add_column(column)
        for queue in report.queues:
            shown = ["-" if v is None else str(v) for v in (queue.workers, queue.depth)]
            table.add_row(queue.name, *shown)
        stdout.print(table)
        for problem in report.problems:
            typer.echo(f"degraded: {problem}", err=True)
        if report.mode == "embedded":
            typer.echo("embedded: jobs run in the process that enqueues them", err=True)
    if report.status != "ok":
        raise typer.Exit(1)
