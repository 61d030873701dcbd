"""The inspector's sign-in: an API key exchanged for a signed session cookie (HttpOnly,
SameSite=Strict, Secure over HTTPS), and the CSRF token every form posts back.

The cookie holds who signed in (the key's actor), which key (a fingerprint of a
MEMLANE_API_KEYS key, or a stored key's id: never a secret), when, and a random nonce,
signed with HMAC-SHA256 under a secret derived from every configured key and the key
pepper: holding one key is not enough to forge a session, and changing them ends every
session. A session also ends when its key is no longer valid (removed from the
configuration, revoked or expired: memlane.api.ui.routing checks on each request) or
after SESSION_HOURS. With neither keys nor pepper configured, the secret is random per
process (sessions do not outlive it nor cross to another worker).
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
from memlane.service.keys.reach import KeyGrant

COOKIE = "memlane_ui"
SIGNIN_COOKIE = "memlane_ui_signin"  # the sign-in form's own CSRF token (double submit)
PATH = "/ui"
SESSION_HOURS = 12
_PROCESS_SECRET = secrets.token_bytes(32)


@dataclass(frozen=True, slots=True)
class Session:
    actor: str  # the key's actor (KeyGrant.actor: api:<name>)
    key_print: str  # which bootstrap key signed in (key_print); "" for a stored key
    issued: int
    nonce: str
    key_id: str | None = None  # which stored key signed in (memlane keys list)
    grant: KeyGrant | None = None  # what the key may do now (looked up on each request)

    @property
    def ui_actor(self) -> str:
        """Who the changes made through the pages are recorded as."""
        return f"ui:{self.actor}"


def key_print(key: str) -> str:
    """A key's fingerprint: enough to tell keys apart, nothing to sign in with."""
    return hashlib.sha256(b"memlane-ui-key\0" + key.encode()).hexdigest()[:24]


def _raw(keys: Sequence[SecretStr]) -> list[str]:
    return [key.get_secret_value() for key in keys]


class Secrets:
    """What sessions are signed under: the MEMLANE_API_KEYS keys and the key pepper."""

    def __init__(self, keys: Sequence[SecretStr], pepper: SecretStr | None = None) -> None:
        self.keys = list(keys)
        parts = sorted(key.get_secret_value().encode() for key in self.keys)
        if pepper is not None:
            parts.append(b"pepper\0" + pepper.get_secret_value().encode())
        joined = b"\0".join(parts)
        self.secret = (
            hashlib.sha256(b"memlane-ui-session\0" + joined).digest() if parts else _PROCESS_SECRET
        )


def same(given: str, expected: str) -> bool:
    """Constant-time equality of two texts, whatever characters `given` holds (a
    hostile cookie or form may hold any; compare_digest refuses non-ASCII text)."""
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode())


def _sign(secret: bytes, payload: bytes) -> str:
    return base64.urlsafe_b64encode(hmac.new(secret, payload, "sha256").digest()).decode()


def issue(actor: str, *, key_id: str | None, fingerprint: str, signer: Secrets) -> str:
    """A session cookie's value for a key that signed in: a stored key is remembered by
    its id, a MEMLANE_API_KEYS key by its `key_print`, an open server's session by
    neither (fingerprint "")."""
    which = {"i": key_id} if key_id is not None else {"k": fingerprint}
    body = {"a": actor, **which, "t": int(time.time()), "n": secrets.token_hex(16)}
    payload = base64.urlsafe_b64encode(json.dumps(body).encode())
    return payload.decode() + "." + _sign(signer.secret, payload)


def read(value: str | None, signer: Secrets) -> Session | None:
    """The session a cookie carries, or None: unsigned, tampered, expired, or its
    MEMLANE_API_KEYS key no longer configured (a stored key's state is the caller's to
    check, through the keyring)."""
    if not value or "." not in value:
        return None
    payload, _, signature = value.rpartition(".")
    if not same(signature, _sign(signer.secret, payload.encode("utf-8", "surrogatepass"))):
        return None
    try:
        body = json.loads(base64.urlsafe_b64decode(payload.encode()))
        key_id = str(body["i"]) if "i" in body else None
        fingerprint = "" if key_id is not None else str(body["k"])
        session = Session(str(body["a"]), fingerprint, int(body["t"]), str(body["n"]), key_id)
    except (ValueError, KeyError, TypeError):
        return None
    if time.time() - session.issued > SESSION_HOURS * 3600:
        return None
    keys = signer.keys
    known = {key_print(s) for s, _ in key_names(_raw(keys))}
    if key_id is None and keys and session.key_print not in known:
        return None  # its key was removed
    return session


def csrf_token(session: Session, signer: Secrets) -> str:
    """The token the session's forms carry: bound to the session, unknowable without
    the secret."""
    return _sign(signer.secret, b"csrf\0" + session.nonce.encode())


def csrf_ok(session: Session, given: str, signer: Secrets) -> bool:
    return bool(given) and same(given, csrf_token(session, signer))
