"""Webhooks as the front doors manage them: subscriptions and their deliveries
(docs/webhooks.md). The events themselves are recorded by the store where they happen
(models/store/webhooks/outbox.py) and sent by the webhooks queue's workers."""

from memlane.service.webhooks.admin import Webhooks

__all__ = ["Webhooks"]
