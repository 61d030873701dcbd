"""The check of routes that manage the deployment rather than a user's data (webhooks,
keys): an `admin` key that reaches every user. A key limited to some users must not see
or subscribe to other tenants' events, nor mint a wider key."""

from __future__ import annotations

from typing import Any

from fastapi import Depends

from memlane.api.deps import Key, needs
from memlane.api.errors import ApiError
from memlane.pipeline import error_codes as codes


def require_every_user(key: Key) -> None:
    if not key.reaches_all:
        raise ApiError(
            codes.FORBIDDEN,
            f"key {key.name} reaches only some users; this route needs an admin key that "
            "reaches every user",
        )


# dependencies=DEPLOYMENT_ADMIN on a route: the declared scope and the reach together
DEPLOYMENT_ADMIN: list[Any] = [needs("admin"), Depends(require_every_user)]
