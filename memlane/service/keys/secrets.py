"""A stored key's secret: how it is made, written and hashed.

A key reads `mlk_<id>_<secret>`: `id` (12 hex) names the row, so a request finds its
key with one primary-key read, and `secret` is 32 random bytes (256 bits). The store
keeps only HMAC-SHA256(pepper, secret). A slow hash (scrypt, argon2) protects
passwords, whose few bits of entropy a fast hash lets an attacker enumerate; a 256-bit
random secret cannot be enumerated at any hash speed, so a slow hash would only cost
every request ~50 ms of CPU (or a cache that keeps secrets in memory) and buy nothing.
The keyed hash adds what a plain one lacks: with MEMLANE_KEY_PEPPER set (kept outside
the database), a dump of the table cannot even check a guessed key.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

PREFIX = "mlk_"
_SHAPE = re.compile(r"mlk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})")
# The HMAC key when no pepper is set: the hash is then as strong as SHA-256 of a 256-bit
# secret (unguessable), without the dump-proofing a pepper adds.
_NO_PEPPER = b"memlane api keys"


def new_key() -> tuple[str, str, str]:
    """(key_id, secret, the key as handed out)."""
    key_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    return key_id, secret, f"{PREFIX}{key_id}_{secret}"


def split_key(token: str) -> tuple[str, str] | None:
    """(key_id, secret) of a key of the stored shape, else None (a bootstrap key, or
    not a key at all)."""
    found = _SHAPE.fullmatch(token)
    return (found.group(1), found.group(2)) if found else None


def hash_secret(secret: str, pepper: str | None) -> str:
    """HMAC-SHA256 of the secret under the pepper, hex (64 characters)."""
    key = pepper.encode() if pepper else _NO_PEPPER
    return hmac.new(key, secret.encode(), hashlib.sha256).hexdigest()


def same_hash(given: str, stored: str) -> bool:
    return hmac.compare_digest(given.encode(), stored.encode())
