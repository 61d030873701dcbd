"""What a key may do: its scopes (read, write, admin) and the users it reaches.

A key's user patterns are exact user ids, or prefixes ending in `*` (`acme:*` reaches
`acme:1` and `acme:bob`, not `acme`); a key with no pattern reaches every user. Plain
data and pure functions: every door (the HTTP API, MCP, the inspector) asks the same
`KeyGrant.can_reach` and `KeyGrant.can` rather than matching patterns itself.

Scopes are nested as an operator reads them: `write` implies `read`, `admin` implies
both (a key that may change a user's memories may read them; an admin key manages keys,
runs the sweep and reads fleet status and metrics).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, get_args

from memlane.pipeline.errors import InvalidInputError

Scope = Literal["read", "write", "admin"]
SCOPES: tuple[Scope, ...] = get_args(Scope)
_RANK: dict[str, int] = {name: rank for rank, name in enumerate(SCOPES)}
KEY_NAME = re.compile(r"[A-Za-z0-9_.-]{1,60}")
MAX_PATTERNS = 100


@dataclass(frozen=True)
class KeyGrant:
    """An authenticated key: its name (never the secret), the actor its changes are
    recorded under, its scopes and user patterns, and its rate limit (None: the
    server's default)."""

    name: str
    scopes: frozenset[str] = frozenset(SCOPES)
    users: tuple[str, ...] = ()
    key_id: str | None = None  # None for a MEMLANE_API_KEYS (bootstrap) key
    rate_per_s: float | None = None
    burst: int | None = None
    actor: str = field(default="")

    def __post_init__(self) -> None:
        if not self.actor:
            object.__setattr__(self, "actor", f"api:{self.name}" if self.name else "api")

    def can(self, scope: str) -> bool:
        """True when the key holds `scope` or one above it (admin ⊃ write ⊃ read)."""
        wanted = _RANK[scope]
        return any(_RANK.get(held, -1) >= wanted for held in self.scopes)

    def can_reach(self, user_id: str) -> bool:
        """True when the key's patterns match `user_id` (no patterns: every user)."""
        return not self.users or any(pattern_matches(p, user_id) for p in self.users)

    @property
    def reaches_all(self) -> bool:
        return not self.users


OPEN = KeyGrant(name="", actor="api")  # no key configured anywhere: the open server


def pattern_matches(pattern: str, user_id: str) -> bool:
    """`acme:*` matches ids starting `acme:`; any other pattern matches itself only."""
    if pattern.endswith("*"):
        return user_id.startswith(pattern[:-1])
    return user_id == pattern


def parse_scopes(scopes: Iterable[str]) -> frozenset[str]:
    """The scopes named (comma-separated parts allowed); an unknown one is refused."""
    found = {part.strip() for item in scopes for part in item.split(",") if part.strip()}
    unknown = sorted(found - set(SCOPES))
    if unknown:
        raise InvalidInputError(
            f"unknown scope {', '.join(unknown)}: the scopes are {', '.join(SCOPES)}"
        )
    if not found:
        raise InvalidInputError(f"give at least one scope ({', '.join(SCOPES)})")
    return frozenset(found)


def parse_patterns(patterns: Iterable[str]) -> tuple[str, ...]:
    """User patterns, stripped and deduplicated in order; `*` only at the end, never
    alone (a key for every user is one with no pattern)."""
    found: list[str] = []
    for pattern in (p.strip() for p in patterns):
        if not pattern or len(pattern) > 200:
            raise InvalidInputError("a user pattern is 1 to 200 characters")
        if "*" in pattern[:-1] or pattern == "*":
            raise InvalidInputError(
                f"user pattern {pattern!r}: give an exact user id or a prefix ending in "
                "`*` such as `acme:*` (no pattern at all reaches every user)"
            )
        if pattern not in found:
            found.append(pattern)
    if len(found) > MAX_PATTERNS:
        raise InvalidInputError(f"at most {MAX_PATTERNS} user patterns per key")
    return tuple(found)


def check_name(name: str) -> str:
    name = name.strip()
    if not KEY_NAME.fullmatch(name):
        raise InvalidInputError(
            f"key name {name!r}: 1 to 60 letters, digits, `_`, `.` or `-` (it appears in "
            "logs and memory histories as api:<name>)"
        )
    return name
