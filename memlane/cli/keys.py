"""`memlane keys …`: API keys as data (memlane.service.keys), made, listed, revoked and
rotated on the store MEMLANE_DATABASE_URL names. A new key is printed once, on stdout;
the store keeps only its hash."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated

import typer

from memlane.cli.common import AsJson, lane_session, print_json, stderr

if TYPE_CHECKING:
    from memlane.models.key_schemas import KeyInfo, NewKey
    from memlane.service.keys.keyring import Keyring

app = typer.Typer(
    help="API keys: scoped to users and to read, write or admin; stored hashed.",
    no_args_is_help=True,
)


@contextmanager
def _keyring() -> Iterator[Keyring]:
    from memlane.service.keys.keyring import Keyring

    with lane_session() as lane:  # checks (or, on SQLite, brings up) the schema
        settings = lane.settings
        yield Keyring(
            settings.resolved_database_url, bootstrap=settings.api_keys, pepper=settings.key_pepper
        )


def _line(info: KeyInfo) -> str:
    users = ", ".join(info.users) or "every user"
    expires = info.expires_at.isoformat(timespec="seconds") if info.expires_at else "never"
    used = info.last_used_at.isoformat(timespec="minutes") if info.last_used_at else "never"
    return (
        f"{info.name}  {info.id}  {info.state}  scopes {','.join(info.scopes)}  users {users}  "
        f"expires {expires}  last used {used}"
    )


def _show_new(made: NewKey, as_json: bool) -> None:
    if as_json:
        print_json(made)
    else:
        typer.echo(made.key)
    stderr.print(f"{_line(made.info)}\nthe key is shown this once; the store keeps only a hash")


@app.command()
def create(
    name: Annotated[str, typer.Option("--name", help="The key's name (logs, histories).")],
    users: Annotated[
        list[str] | None,
        typer.Option(
            "--users",
            help="A user id, or a prefix ending in * (acme:*); repeat for more. None: every user.",
            show_default=False,
        ),
    ] = None,
    scopes: Annotated[
        str, typer.Option("--scopes", help="Comma-separated: read, write, admin.")
    ] = "read,write",
    expires: Annotated[
        str | None,
        typer.Option(
            "--expires",
            help="A duration from now (90d, 12h) or an ISO 8601 time. Default: never.",
            show_default=False,
        ),
    ] = None,
    rate: Annotated[
        float | None,
        typer.Option(
            "--rate",
            min=0,
            help="Requests per second (0: unlimited). Default: MEMLANE_KEY_RATE_PER_S.",
            show_default=False,
        ),
    ] = None,
    burst: Annotated[
        int | None,
        typer.Option(
            "--burst",
            min=1,
            help="Requests at once. Default: MEMLANE_KEY_BURST.",
            show_default=False,
        ),
    ] = None,
    as_json: AsJson = False,
) -> None:
    """Make a key and print it (stdout, once); what it may do goes to stderr."""
    from memlane.service.keys.keyring import parse_expiry

    with _keyring() as keyring:
        when = parse_expiry(expires, now=keyring.clock()) if expires else None
        made = keyring.create(
            name,
            scopes=[scopes],
            users=users or [],
            expires_at=when,
            rate_per_s=rate,
            burst=burst,
        )
    _show_new(made, as_json)


@app.command("list")
def list_keys(as_json: AsJson = False) -> None:
    """Every stored key: name, id, state, scopes, users, expiry, last use (never the key).
    MEMLANE_API_KEYS are not stored and not listed."""
    with _keyring() as keyring:
        infos = keyring.all_keys()
    if as_json:
        print_json(infos)
        return
    for info in infos:
        typer.echo(_line(info))
    if not infos:
        stderr.print("no stored keys (memlane keys create --name N)")


@app.command()
def revoke(
    key: Annotated[str, typer.Argument(help="A key's name (all its keys) or id.")],
    as_json: AsJson = False,
) -> None:
    """Revoke a key: refused at once by new processes, within seconds by running ones."""
    with _keyring() as keyring:
        infos = keyring.revoke(key)
    if as_json:
        print_json(infos)
    for info in infos:
        stderr.print(f"revoked {info.name} ({info.id})")


@app.command()
def rotate(
    key: Annotated[str, typer.Argument(help="A key's name or id.")],
    grace: Annotated[
        str | None,
        typer.Option(
            "--grace",
            help="How long the old key stays valid (1h, 7d). Default: "
            "MEMLANE_KEY_ROTATION_GRACE_S.",
            show_default=False,
        ),
    ] = None,
    as_json: AsJson = False,
) -> None:
    """A new key with the same name, scopes, users and limit, printed once; the old one
    stays valid for the grace period, then expires."""
    from memlane.service.keys.keyring import parse_duration

    with _keyring() as keyring:
        from memlane.config.settings import load_settings

        period = (
            parse_duration(grace)
            if grace
            else timedelta(seconds=load_settings().key_rotation_grace_s)
        )
        made = keyring.rotate(key, grace=period)
    _show_new(made, as_json)
