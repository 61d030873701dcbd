"""Webhook subscriptions: added with a fresh secret, listed, removed."""

from __future__ import annotations

import secrets
import uuid
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from memlane.models.tables import WebhookRow
from memlane.models.webhook_schemas import WebhookCreate, WebhookCreated, WebhookPublic
from memlane.pipeline.errors import NotFoundError


def add(session: Session, *, webhook: WebhookCreate, now: datetime) -> WebhookCreated:
    row = WebhookRow(
        id=f"wh_{uuid.uuid4().hex[:20]}",
        url=webhook.url,
        events=list(webhook.events),
        users=webhook.users,
        secret=secrets.token_hex(32),
        include_content=webhook.include_content,
        created_at=now,
    )
    session.add(row)
    session.flush()
    return WebhookCreated(**to_public(row).model_dump(), secret=row.secret)


def list_all(session: Session) -> list[WebhookPublic]:
    rows = session.scalars(select(WebhookRow).order_by(WebhookRow.created_at, WebhookRow.id))
    return [to_public(row) for row in rows]


def remove(session: Session, webhook_id: str) -> None:
    """Delete the subscription and every delivery owed to it."""
    result = session.execute(delete(WebhookRow).where(WebhookRow.id == webhook_id))
    if not result.rowcount:  # type: ignore[attr-defined]
        raise NotFoundError(f"no webhook {webhook_id!r}; `memlane webhooks list` shows them")


def to_public(row: WebhookRow) -> WebhookPublic:
    return WebhookPublic(
        id=row.id,
        url=row.url,
        events=row.events,  # type: ignore[arg-type]
        users=row.users,
        include_content=row.include_content,
        created_at=row.created_at,
    )
