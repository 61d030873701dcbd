"""The typed HTTP client of memlane's API (client), sync and async, and its typed errors
(errors): `from memlane.client import Client, AsyncClient`."""

from memlane.client.client import AsyncClient, Client, ClientSettings, route_of

__all__ = ["AsyncClient", "Client", "ClientSettings", "route_of"]
