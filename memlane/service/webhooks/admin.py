"""Adding, listing and removing webhook subscriptions, and reading their deliveries."""

from __future__ import annotations

from datetime import UTC, datetime

from memlane.models.db import unit_of_work
from memlane.models.store.webhooks import deliveries, subscriptions
from memlane.models.webhook_schemas import (
    DeliveryPublic,
    DeliveryStatus,
    WebhookCreate,
    WebhookCreated,
    WebhookPublic,
)


class Webhooks:
    """The subscriptions of the store at `url` (a database URL, as `Memlane.url`)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def add(self, webhook: WebhookCreate) -> WebhookCreated:
        """Subscribe; the answer carries the signing secret, shown this once."""
        with unit_of_work(self.url) as session:
            return subscriptions.add(session, webhook=webhook, now=datetime.now(UTC))

    def subscriptions(self) -> list[WebhookPublic]:
        with unit_of_work(self.url) as session:
            return subscriptions.list_all(session)

    def remove(self, webhook_id: str) -> None:
        """Unsubscribe: nothing more is sent to it, not even what was pending."""
        with unit_of_work(self.url) as session:
            subscriptions.remove(session, webhook_id)

    def deliveries(
        self,
        *,
        status: DeliveryStatus | None = None,
        webhook_id: str | None = None,
        limit: int = 100,
    ) -> list[DeliveryPublic]:
        """Deliveries, newest first: `dead` ones are those that ran out of attempts or
        were refused (their last error says which)."""
        with unit_of_work(self.url) as session:
            return deliveries.list_deliveries(
                session, status=status, webhook_id=webhook_id, limit=limit
            )
