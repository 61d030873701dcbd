"""MEMLANE_API_KEYS entries read as keys and the actors they name, compared in constant
time. The doors check keys with memlane.service.keys.keyring (stored keys and these
bootstrap keys, read through `key_names`); `key_actor` and `key_accepted` answer for the
bootstrap keys alone."""

from __future__ import annotations

import hmac
import re
from collections.abc import Sequence

from pydantic import SecretStr

_KEY_NAME = re.compile(r"[A-Za-z0-9_.-]{1,60}")


def key_names(keys: list[str]) -> list[tuple[str, str]]:
    """(secret, actor) pairs of MEMLANE_API_KEYS entries: `name:secret` is the key
    `secret` acting as `api:name`; any entry as a whole is also a key acting as `api`
    (keys set before names existed may hold a colon)."""
    pairs: list[tuple[str, str]] = []
    for entry in keys:
        name, colon, secret = entry.partition(":")
        if colon and secret and _KEY_NAME.fullmatch(name):
            pairs.append((secret, f"api:{name}"))
        pairs.append((entry, "api"))
    return pairs


def key_actor(given: str, keys: Sequence[SecretStr]) -> str | None:
    """Who `given` is (`api`, or `api:<name>` for a named key: `key_names`), or None
    when keys are configured and it is none of them. Every key is compared, in constant
    time, so the answer's timing tells nothing of which is near."""
    if not keys:
        return "api"
    raw = given.encode()
    pairs = key_names([key.get_secret_value() for key in keys])
    matches = [(hmac.compare_digest(raw, secret.encode()), actor) for secret, actor in pairs]
    found = [actor for matched, actor in matches if matched]
    return found[0] if raw and found else None


def key_accepted(given: str, keys: Sequence[SecretStr]) -> bool:
    """True with no keys configured, else when `given` is one of them (`key_actor`).
    The MCP server's HTTP transport takes the same keys (memlane.mcp.server)."""
    return key_actor(given, keys) is not None
