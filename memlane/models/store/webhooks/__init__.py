"""The store of webhooks: subscriptions, the events owed to them (written in the
transaction of the event: the outbox), and their deliveries' progress."""
