"""`GET /metrics`: Prometheus text with request latency per route (templates, not ids),
what assemblies used, what enqueues stored, and job figures read from the store; behind
the API keys when they are set."""

from __future__ import annotations

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from memlane.api.app import create_app
from memlane.config.settings import load_settings
from memlane.service.facade import Memlane


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_metrics_count_requests_assemblies_enqueues_and_jobs(pg: str) -> None:
    with Memlane(load_settings(database_url=pg)) as lane, TestClient(create_app(lane)) as client:
        body = {
            "conversation_id": "c1",
            "user_id": "u1",
            "messages": [{"role": "user", "content": "I prefer green tea."}],
            "final": True,
        }
        assert client.post("/v1/transcripts", json=body).status_code == 202
        lane.flush()
        for _ in range(2):
            assert (
                client.post("/v1/context", json={"user_id": "u1", "query": "tea"}).status_code
                == 200
            )
        client.get("/v1/users/u1/memories/mem_nope")  # a 404, under the route's template
        got = samples(client.get("/metrics").text)
    route = "memlane_http_request_seconds_count"
    assert got[(route, (("method", "POST"), ("route", "/v1/context"), ("status", "200")))] == 2
    assert (
        got[
            (
                route,
                (
                    ("method", "GET"),
                    ("route", "/v1/users/{user_id}/memories/{memory_id}"),
                    ("status", "404"),
                ),
            )
        ]
        == 1
    )
    assert got[("memlane_assemble_used_tokens_count", ())] == 2
    assert got[("memlane_enqueued_total", (("kind", "transcripts"),))] == 1
    assert got[("memlane_enqueued_total", (("kind", "messages"),))] == 1
    assert got[("memlane_jobs", (("stage", "store"), ("status", "done")))] == 1
    assert ("memlane_llm_tokens_total", (("direction", "in"),)) in got


def test_metrics_are_behind_the_api_keys(pg: str) -> None:
    settings = load_settings(database_url=pg, api_keys="k-123")
    with Memlane(settings) as lane, TestClient(create_app(lane, settings)) as client:
        assert client.get("/metrics").status_code == 401
        answer = client.get("/metrics", headers={"Authorization": "Bearer k-123"})
        assert answer.status_code == 200 and "memlane_http_request_seconds" in answer.text
