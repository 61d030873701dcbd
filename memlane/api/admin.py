"""The check of routes that manage the deployment rather than a user's data (webhooks):
one dependency, so the rule lives in one place. Keys have no scopes yet: every key of
MEMLANE_API_KEYS (checked by the /v1 router) is an administrator's, so the check passes
once the key did; a scope check replaces its body when keys carry scopes."""

from __future__ import annotations

from fastapi import Request


async def require_admin(request: Request) -> None:
    """An administrator's key: today, any valid key (see the module's docstring)."""
    del request  # the key's scope will be read from the request once keys have scopes
