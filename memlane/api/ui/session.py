"""The inspector's sign-in: an API key exchanged for a signed session cookie (HttpOnly,
SameSite=Strict, Secure over HTTPS), and the CSRF token every form posts back.

The cookie holds who signed in (the key's actor), a fingerprint of the key, when, and a
random nonce, signed with HMAC-SHA256 under a secret derived from every configured key:
holding one key is not enough to forge a session, and changing the keys ends every
session. A session also ends when its key is no longer configured (the fingerprint is
checked on each request) or after SESSION_HOURS. With no keys configured (the API open,
on loopback), the secret is random per process.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import SecretStr

from memlane.service.api_keys import key_names

COOKIE = "memlane_ui"
SIGNIN_COOKIE = "memlane_ui_signin"  # the sign-in form's own CSRF token (double submit)
PATH = "/ui"
SESSION_HOURS = 12
_PROCESS_SECRET = secrets.token_bytes(32)


@dataclass(frozen=True, slots=True)
class Session:
    actor: str  # the key's actor (memlane.service.api_keys.key_actor)
    key_print: str  # which key signed in (key_print); a key's reach is looked up by it
    issued: int
    nonce: str

    @property
    def ui_actor(self) -> str:
        """Who the changes made through the pages are recorded as."""
        return f"ui:{self.actor}"


def key_print(key: str) -> str:
    """A key's fingerprint: enough to tell keys apart, nothing to sign in with."""
    return hashlib.sha256(b"memlane-ui-key\0" + key.encode()).hexdigest()[:24]


def _raw(keys: Sequence[SecretStr]) -> list[str]:
    return [key.get_secret_value() for key in keys]


def _secret(keys: Sequence[SecretStr]) -> bytes:
    if not keys:
        return _PROCESS_SECRET
    joined = b"\0".join(sorted(key.get_secret_value().encode() for key in keys))
    return hashlib.sha256(b"memlane-ui-session\0" + joined).digest()


def same(given: str, expected: str) -> bool:
    """Constant-time equality of two texts, whatever characters `given` holds (a
    hostile cookie or form may hold any; compare_digest refuses non-ASCII text)."""
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode())


def _sign(secret: bytes, payload: bytes) -> str:
    return base64.urlsafe_b64encode(hmac.new(secret, payload, "sha256").digest()).decode()


def issue(actor: str, key: str, keys: Sequence[SecretStr]) -> str:
    """A session cookie's value for a key that signed in."""
    body = {"a": actor, "k": key_print(key), "t": int(time.time()), "n": secrets.token_hex(16)}
    payload = base64.urlsafe_b64encode(json.dumps(body).encode())
    return payload.decode() + "." + _sign(_secret(keys), payload)


def read(value: str | None, keys: Sequence[SecretStr]) -> Session | None:
    """The session a cookie carries, or None: unsigned, tampered, expired, or its key
    no longer configured."""
    if not value or "." not in value:
        return None
    payload, _, signature = value.rpartition(".")
    if not same(signature, _sign(_secret(keys), payload.encode("utf-8", "surrogatepass"))):
        return None
    try:
        body = json.loads(base64.urlsafe_b64decode(payload.encode()))
        session = Session(str(body["a"]), str(body["k"]), int(body["t"]), str(body["n"]))
    except (ValueError, KeyError, TypeError):
        return None
    if time.time() - session.issued > SESSION_HOURS * 3600:
        return None
    if keys and session.key_print not in {key_print(s) for s, _ in key_names(_raw(keys))}:
        return None  # its key was removed
    return session


def csrf_token(session: Session, keys: Sequence[SecretStr]) -> str:
    """The token the session's forms carry: bound to the session, unknowable without
    the secret."""
    return _sign(_secret(keys), b"csrf\0" + session.nonce.encode())


def csrf_ok(session: Session, given: str, keys: Sequence[SecretStr]) -> bool:
    return bool(given) and same(given, csrf_token(session, keys))
