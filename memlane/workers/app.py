"""The Celery app. Configuration is read from memlane's settings when Celery first needs
it, not at import; database engines are built per worker process after the fork."""

from __future__ import annotations

import logging
from typing import Any

from memlane.config import startup
from memlane.config.extras import FLEET_MODULES, require
from memlane.config.queues import TASK_ROUTES, Queue
from memlane.config.settings import Settings, get_settings
from memlane.workers import warmup

require("the Celery fleet (memlane.workers.app)", "fleet", *FLEET_MODULES)

# After the check, which names the extra to install when Celery is missing.
from celery import Celery  # noqa: E402
from celery.signals import (  # noqa: E402
    beat_init,
    celeryd_after_setup,
    celeryd_init,
    worker_process_init,
)
from celery.worker.consumer import Consumer as _CeleryConsumer  # noqa: E402


def celery_config(settings: Settings) -> dict[str, Any]:
    if settings.broker_url is None:
        from memlane.pipeline.errors import ConfigurationError

        raise ConfigurationError(
            "MEMLANE_BROKER_URL is not set: a Celery worker needs a broker "
            "(redis://…). Without one, memlane runs jobs in-process instead."
        )
    hard_limit = max(60, int(settings.llm_timeout_s * 4))
    return {
        "broker_url": settings.broker_url,
        "result_backend": settings.result_backend,
        "task_ignore_result": settings.result_backend is None,
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "task_routes": TASK_ROUTES,
        "task_default_queue": Queue.INGEST.value,
        # A killed worker loses nothing: messages are acknowledged after the task ran,
        # and a task whose process died is requeued.
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "task_soft_time_limit": hard_limit - 10,
        "task_time_limit": hard_limit,
        # Unacknowledged messages come back after this long if their worker vanished
        # entirely; it must exceed the hard time limit.
        "broker_transport_options": {"visibility_timeout": max(300, hard_limit * 2)},
        "broker_connection_retry_on_startup": True,
        # survives the loss of the broker with messages unacknowledged (OutageSafeConsumer)
        "worker_consumer": "memlane.workers.app:OutageSafeConsumer",
        # Flower sees tasks only when workers and clients send events.
        "worker_send_task_events": True,
        "task_send_sent_event": True,
        "beat_schedule": {
            "memlane-sweep": {"task": "memlane.sweep", "schedule": settings.sweep_every_s},
            "memlane-webhooks": {
                "task": "memlane.webhooks.dispatch",
                "schedule": settings.webhook_every_s,
            },
        },
        "timezone": "UTC",
    }


log = logging.getLogger("memlane.worker")


class OutageSafeConsumer(_CeleryConsumer):  # type: ignore[misc]
    """Celery's consumer, minus one way a broker outage ends the worker process.

    On a lost broker connection, Celery 5.7 (`on_connection_error_after_connected`)
    first `collect()`s the connection, which clears its transport's client, then
    `close()`s it: closing the default channel restores its unacknowledged messages, which
    asks that cleared client for Redis's address and raises AttributeError("'NoneType'
    object has no attribute 'hostname'") from kombu's redis `Channel._connparams`. The
    error is not a connection error, so `ignore_errors` lets it through and the worker
    exits ("Unrecoverable error"). It happens only with messages in flight, so most with
    the 32-thread extract worker, but prefork workers hit it too (bench.drills.broker_outage).
    Here that close of an already collected connection is best effort: the broker is away,
    so the restore could not have run anyway; the unacknowledged messages come back after
    the visibility timeout, or through the stuck sweep if Redis lost them.

    The same cleared client fails the ack of a task delivered before the loss and finished
    after it (the ack runs on the consumer's loop once it reconnects): that ack is dropped
    with a warning instead. Its message comes back as above, and its job row, done, makes
    the redelivered task a no-op.
    """

    def call_soon_ack(self, p: Any, *args: Any, **kwargs: Any) -> Any:
        return super().call_soon_ack(_ack_unless_collected(p), *args, **kwargs)

    def on_connection_error_after_connected(self, exc: Exception) -> None:
        connection = self.connection
        if connection is not None:
            close = connection.close

            def close_what_is_left() -> None:
                try:
                    close()
                except AttributeError as error:  # the transport collected: see above
                    log.warning("broker connection closed without restoring: %r", error)

            connection.close = close_what_is_left
        super().on_connection_error_after_connected(exc)


def _ack_unless_collected(ack: Any) -> Any:
    """`ack` (a message's ack_log_error or reject_log_error), except when the message came
    through a broker connection that was collected since (OutageSafeConsumer)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return ack(*args, **kwargs)
        except AttributeError as error:
            channel = getattr(getattr(ack, "__self__", None), "channel", None)
            transport = getattr(channel, "connection", None)
            if channel is not None and getattr(transport, "client", None) is not None:
                raise  # not the collected connection's: a real bug
            log.warning("not acknowledged (its broker connection is gone): %r", error)
            return None

    return call


class _LazyConfig:
    """Celery reads this object's attributes on first use of `app.conf`, so settings are
    read then, not at import."""

    def __init__(self) -> None:
        self._config: dict[str, Any] | None = None

    def _load(self) -> dict[str, Any]:
        if self._config is None:
            self._config = celery_config(get_settings())
        return self._config

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        config = self._load()
        if name in config:
            return config[name]
        raise AttributeError(name)

    def __dir__(self) -> list[str]:
        return list(self._load())


_lazy_config = _LazyConfig()
app = Celery("memlane", include=["memlane.workers.tasks"])
app.config_from_object(_lazy_config)


def configure_app(settings: Settings) -> Celery:
    """Point the app at these settings instead of the environment's (front doors built
    with explicit settings, tests)."""
    config = celery_config(settings)
    previous = _lazy_config._config
    _lazy_config._config = config
    app.conf.update(config)
    if previous is not None and previous["broker_url"] != config["broker_url"]:
        # the producer pools are made for one broker: drop them (as Celery does after a
        # fork) so the next publish opens pools for this one
        app._after_fork()  # type: ignore[attr-defined]
    return app


@worker_process_init.connect
def _fresh_engines_per_process(**_: Any) -> None:
    # A forked child must not reuse the parent's connection pool.
    from memlane.models.db import dispose_engines

    dispose_engines()
    warmup.on_worker_process_init()  # its models and clients, before the first job


# Start-up checks of `celery -A memlane.workers.app worker|beat` however it is started
# (memlane.config.startup): a refusal exits before the worker connects; the start line is
# logged once Celery's logging is set up.
@celeryd_init.connect
def _refuse_an_implicit_database(**_: Any) -> None:
    startup.exit_unless(lambda: startup.require_database(get_settings(), "a memlane worker"))


@celeryd_after_setup.connect
def _log_what_the_worker_runs_on(**_: Any) -> None:
    startup.log_start(get_settings(), "worker")


@beat_init.connect
def _beat_checks_and_logs(**_: Any) -> None:
    startup.exit_unless(lambda: startup.require_database(get_settings(), "memlane's beat"))
    startup.log_start(get_settings(), "beat")


@celeryd_after_setup.connect
def _warm_before_the_first_job(instance: Any = None, **_: Any) -> None:
    # litellm, the embedder and the tokenizer take seconds to load: paid at start-up,
    # not in the first job's latency_ms (memlane.workers.warmup says which signal does what)
    warmup.on_worker_start(instance)
