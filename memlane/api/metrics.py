"""Prometheus metrics of the HTTP API (`GET /metrics`, behind the API keys when they are
set): request latency per route, what assemblies used, what enqueues stored, and, read
from the jobs table at scrape time (jobs run in worker processes, which this process
cannot count), jobs by stage and status, failures by reason and the LLM's tokens and
cost. Each app has its own registry, so several apps in one process do not collide."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from starlette.responses import Response
from starlette.types import ASGIApp, Scope

from memlane.api.observed import after_each_request
from memlane.models.db import unit_of_work
from memlane.models.tables import Job

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_LATENCY_BUCKETS = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class JobsCollector(Collector):
    """Job figures from the store, read when Prometheus scrapes."""

    def __init__(self, url: Callable[[], str]) -> None:
        self._url = url

    def collect(self) -> Iterator[Any]:
        jobs = GaugeMetricFamily(
            "memlane_jobs", "Jobs by stage and status", labels=["stage", "status"]
        )
        tokens = CounterMetricFamily(
            "memlane_llm_tokens", "Tokens the extraction LLM read and wrote", labels=["direction"]
        )
        cost = CounterMetricFamily("memlane_llm_cost_usd", "What the extraction LLM cost")
        try:
            with unit_of_work(self._url()) as session:
                for stage, status, count in session.execute(
                    select(Job.stage, Job.status, func.count()).group_by(Job.stage, Job.status)
                ):
                    jobs.add_metric([stage, status], count)
                tokens_in, tokens_out, spent = session.execute(
                    select(
                        func.coalesce(func.sum(Job.tokens_in), 0),
                        func.coalesce(func.sum(Job.tokens_out), 0),
                        func.coalesce(func.sum(Job.cost_usd), 0.0),
                    )
                ).one()
        except Exception:  # a scrape must not fail because the database is down
            return
        tokens.add_metric(["in"], float(tokens_in or 0))
        tokens.add_metric(["out"], float(tokens_out or 0))
        cost.add_metric([], float(spent or 0.0))
        yield from (jobs, tokens, cost)


class ApiMetrics:
    """The metrics of one app."""

    def __init__(self, url: Callable[[], str]) -> None:
        self.registry = CollectorRegistry()
        self.requests = Histogram(
            "memlane_http_request_seconds",
            "HTTP request latency",
            ["method", "route", "status"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.assemble_tokens = Histogram(
            "memlane_assemble_used_tokens",
            "Tokens of the contexts assembled",
            buckets=(100, 250, 500, 1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000),
            registry=self.registry,
        )
        self.assemble_items = Histogram(
            "memlane_assemble_items",
            "Items in the contexts assembled",
            buckets=(0, 1, 5, 10, 25, 50, 100, 250, 500),
            registry=self.registry,
        )
        self.enqueued = Counter(
            "memlane_enqueued",
            "What enqueues stored and queued",
            ["kind"],
            registry=self.registry,
        )
        self.registry.register(JobsCollector(url))

    def timing(self, app: ASGIApp) -> ASGIApp:
        """`app` with each HTTP request's latency observed under its route's template (no
        ids in label values)."""

        def observe(scope: Scope, status: int, seconds: float) -> None:
            path = getattr(scope.get("route"), "path", "unmatched")
            self.requests.labels(scope["method"], path, str(status)).observe(seconds)

        return after_each_request(app, observe)

    def render(self) -> Response:
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE)
