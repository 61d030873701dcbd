"""`memlane webhooks …`: subscriptions to memlane's events and their deliveries
(docs/webhooks.md). Run against the store directly, as the other admin commands."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from memlane.cli.common import AsJson, lane_session, print_json, shown, stdout
from memlane.models.webhook_schemas import EVENT_TYPES, DeliveryStatus, WebhookCreate

app = typer.Typer(help="Webhooks: signed HTTP calls on memlane's events.", no_args_is_help=True)


@app.command()
def add(
    url: Annotated[str, typer.Argument(help="Where to POST the events.", show_default=False)],
    events: Annotated[
        str,
        typer.Option(help=f"Comma-separated, of: {','.join(EVENT_TYPES)}.", show_default=False),
    ],
    users: Annotated[
        str | None,
        typer.Option(help="Only users whose id matches this glob (team-*).", show_default=False),
    ] = None,
    include_content: Annotated[
        bool, typer.Option("--include-content", help="Add a memory's text to memory events.")
    ] = False,
    as_json: AsJson = False,
) -> None:
    """Subscribe URL to events; prints its id and the secret that signs every delivery
    (shown this once)."""
    from memlane.service.webhooks import Webhooks

    webhook = WebhookCreate.model_validate(
        {
            "url": url,
            "events": [e.strip() for e in events.split(",") if e.strip()],
            "users": users,
            "include_content": include_content,
        }
    )
    with lane_session() as lane:
        created = Webhooks(lane.url).add(webhook)
    if as_json:
        print_json(created)
        return
    typer.echo(f"{created.id}: {created.url} ({', '.join(created.events)})")
    typer.echo(f"secret: {created.secret}")


@app.command("list")
def list_webhooks(as_json: AsJson = False) -> None:
    """Every subscription (without secrets)."""
    from memlane.service.webhooks import Webhooks

    with lane_session() as lane:
        hooks = Webhooks(lane.url).subscriptions()
    if as_json:
        print_json(hooks)
        return
    table = Table(title=f"{len(hooks)} webhooks", box=None, padding=(0, 1, 0, 0))
    for name in ("id", "url", "events", "users", "content"):
        table.add_column(name, overflow="fold")
    for hook in hooks:
        content = "yes" if hook.include_content else "no"
        table.add_row(hook.id, shown(hook.url), ",".join(hook.events), hook.users or "*", content)
    stdout.print(table)


@app.command()
def remove(
    webhook_id: Annotated[str, typer.Argument(help="A webhook id.", show_default=False)],
) -> None:
    """Unsubscribe; what was still pending for it is dropped."""
    from memlane.service.webhooks import Webhooks

    with lane_session() as lane:
        Webhooks(lane.url).remove(webhook_id)
    typer.echo(f"{webhook_id}: removed")


@app.command()
def deliveries(
    status: Annotated[DeliveryStatus | None, typer.Option(show_default=False)] = None,
    webhook: Annotated[
        str | None, typer.Option(help="Only this webhook's.", show_default=False)
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=10_000)] = 100,
    as_json: AsJson = False,
) -> None:
    """Deliveries, newest first: pending (with the next attempt), delivered, or dead
    (out of attempts, or refused by the receiver: the last error says which)."""
    from memlane.service.webhooks import Webhooks

    with lane_session() as lane:
        rows = Webhooks(lane.url).deliveries(status=status, webhook_id=webhook, limit=limit)
    if as_json:
        print_json(rows)
        return
    table = Table(title=f"{len(rows)} deliveries", box=None, padding=(0, 1, 0, 0))
    for name in ("id", "webhook", "event", "type", "user", "status", "tries", "next / error"):
        table.add_column(name, overflow="fold")
    for row in rows:
        last = (
            row.next_attempt_at.isoformat(timespec="seconds")
            if row.status == "pending"
            else (row.last_error or "")
        )
        table.add_row(
            str(row.id),
            row.webhook_id,
            row.event_id,
            row.event_type,
            shown(row.user_id or ""),
            row.status,
            str(row.attempts),
            shown(last),
        )
    stdout.print(table)
