"""Webhook subscriptions and their deliveries (docs/webhooks.md): administrators only."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Response

from memlane.api.admin import DEPLOYMENT_ADMIN
from memlane.api.deps import Lane, v1_router
from memlane.models.webhook_schemas import (
    DeliveryPublic,
    DeliveryStatus,
    WebhookCreate,
    WebhookCreated,
    WebhookPublic,
)
from memlane.service.webhooks import Webhooks

router = v1_router()


@router.post("/webhooks", status_code=201, tags=["webhooks"], dependencies=DEPLOYMENT_ADMIN)
def add_webhook(webhook: WebhookCreate, lane: Lane) -> WebhookCreated:
    """Subscribe a URL to events; the answer's `secret` signs every delivery (shown once)."""
    return Webhooks(lane.url).add(webhook)


@router.get("/webhooks", tags=["webhooks"], dependencies=DEPLOYMENT_ADMIN)
def list_webhooks(lane: Lane) -> list[WebhookPublic]:
    return Webhooks(lane.url).subscriptions()


@router.get("/webhooks/deliveries", tags=["webhooks"], dependencies=DEPLOYMENT_ADMIN)
def webhook_deliveries(
    lane: Lane,
    status: Annotated[DeliveryStatus | None, Query()] = None,
    webhook_id: Annotated[str | None, Query(max_length=40)] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
) -> list[DeliveryPublic]:
    """Deliveries, newest first; `status=dead` lists those out of attempts or refused."""
    return Webhooks(lane.url).deliveries(status=status, webhook_id=webhook_id, limit=limit)


@router.delete(
    "/webhooks/{webhook_id}", status_code=204, tags=["webhooks"], dependencies=DEPLOYMENT_ADMIN
)
def remove_webhook(webhook_id: str, lane: Lane) -> Response:
    """Unsubscribe; its pending deliveries are dropped with it."""
    Webhooks(lane.url).remove(webhook_id)
    return Response(status_code=204)
