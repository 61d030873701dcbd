"""A typed HTTP client for memlane's API: `Client` (sync) and `AsyncClient` (asyncio), on
httpx. A chat app needs no database credentials, only the API's address and a key:

    from memlane.client import Client

    with Client("http://127.0.0.1:8000", api_key="...") as memlane:
        memlane.enqueue({"conversation_id": "c1", "user_id": "u1", "messages": messages})
        prompt = memlane.context("u1", "what does the user prefer?", budget_tokens=2000).context

The address and key come from the arguments, else from MEMLANE_CLIENT_URL and
MEMLANE_CLIENT_KEY (the server's keys are MEMLANE_API_KEYS: another variable, another
side). One method per route of the API, with the API's own request and answer models;
errors are the typed errors of `memlane.client.errors`. A 503 is retried with exponential
backoff, and nothing else: a 503 means the server did nothing (not ready, database down)
or, for a transcript whose broker was down, stored it and queued its jobs, which a
re-sent transcript does not store twice.

`Client` (sync.py) and `AsyncClient` (aio.py) are one method per route each; what they
share, each route's request and answer, the settings and the retry rule, is written once
(calls.py), and only the send differs. tests/integration/test_client.py checks that every
route of the API has a method in both.
"""

from memlane.client.aio import AsyncClient
from memlane.client.calls import ClientSettings, route_of
from memlane.client.sync import Client

__all__ = ["AsyncClient", "Client", "ClientSettings", "route_of"]
