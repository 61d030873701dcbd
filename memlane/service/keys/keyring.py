"""The keys a server accepts: rows of `api_keys` (made, listed, revoked and rotated here)
and the MEMLANE_API_KEYS bootstrap keys, which reach every user with every scope.

Checking a key costs no database read on the hot path: each key's row is kept in this
process for CACHE_S, so a revocation or a rotation's end reaches every process within
that (at once in the process that made it). A key's last use is written at most once
per TOUCH_S per process, not once per request.
"""

from __future__ import annotations

import hmac
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pydantic import SecretStr

from memlane.models.db import one_statement, unit_of_work
from memlane.models.key_schemas import KeyInfo, KeyState, NewKey
from memlane.models.store import keys as store
from memlane.models.tables import ApiKeyRow
from memlane.pipeline.errors import InvalidInputError, NotFoundError
from memlane.service.api_keys import key_names
from memlane.service.keys import secrets
from memlane.service.keys.reach import (
    OPEN,
    SCOPES,
    KeyGrant,
    check_name,
    parse_patterns,
    parse_scopes,
)

CACHE_S = 5.0
TOUCH_S = 60.0
CACHE_MAX = 10_000  # key ids kept (found or not); random ids sent by a caller cannot grow it


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class _Cached:
    row: ApiKeyRow | None
    read_at: float


def state_of(row: ApiKeyRow, now: datetime) -> KeyState:
    if row.revoked_at is not None:
        return "revoked"
    if row.expires_at is not None and row.expires_at <= now:
        return "expired"
    return "active"


def info_of(row: ApiKeyRow, now: datetime) -> KeyInfo:
    return KeyInfo(
        id=row.id,
        name=row.name,
        scopes=sorted(row.scopes, key=SCOPES.index),
        users=list(row.users),
        rate_per_s=row.rate_per_s,
        burst=row.burst,
        created_at=row.created_at,
        expires_at=row.expires_at,
        last_used_at=row.last_used_at,
        revoked_at=row.revoked_at,
        state=state_of(row, now),
    )


def grant_of(row: ApiKeyRow) -> KeyGrant:
    return KeyGrant(
        name=row.name,
        key_id=row.id,
        scopes=frozenset(row.scopes),
        users=tuple(row.users),
        rate_per_s=row.rate_per_s,
        burst=row.burst,
    )


class Keyring:
    """The keys of the store at `url` and the bootstrap `keys`, hashed under `pepper`."""

    def __init__(
        self,
        url: str,
        *,
        bootstrap: Sequence[SecretStr] = (),
        pepper: SecretStr | None = None,
        clock: Callable[[], datetime] = utcnow,
        ticks: Callable[[], float] = time.monotonic,  # the cache's clock
    ) -> None:
        self.url, self.clock, self._ticks = url, clock, ticks
        self._pepper = pepper.get_secret_value() if pepper is not None else None
        self._bootstrap = [
            (secret, actor.removeprefix("api").removeprefix(":"))
            for secret, actor in key_names([k.get_secret_value() for k in bootstrap])
        ]
        self._rows: dict[str, _Cached] = {}
        self._touched: dict[str, float] = {}
        self._open: tuple[bool, float] | None = None  # (no key ever made, read at)
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ checking a key

    def cached(self, token: str) -> KeyGrant | bool | None:
        """The key's grant (or None: refused) when this process can tell without the
        database; False when `verify` must read it."""
        if self._bootstrap:
            found = self._bootstrap_grant(token)
            if found is not None or secrets.split_key(token) is None:
                return found
        elif self._open is None or self._ticks() - self._open[1] > CACHE_S:
            return False
        elif self._open[0]:
            return OPEN
        parts = secrets.split_key(token)
        if parts is None:
            return None
        entry = self._rows.get(parts[0])
        if entry is None or self._ticks() - entry.read_at > CACHE_S:
            return False
        if entry.row is not None and self._touch_due(entry.row.id):
            return False
        return self._grant(entry.row, parts[1])

    def verify(self, token: str) -> KeyGrant | None:
        """The key's grant, or None when it is no key, revoked or expired. With no key
        anywhere (none configured, none ever made in the store) every request is let in."""
        found = self.cached(token)
        if found is not False:
            return found if isinstance(found, KeyGrant) else None
        if not self._bootstrap and self._is_open():
            return OPEN
        parts = secrets.split_key(token)
        if parts is None:
            return None
        key_id, secret = parts
        grant = self._grant(self._row(key_id), secret)
        if grant is not None:
            self._touch(key_id)
        return grant

    def live_grant(self, key_id: str) -> KeyGrant | None:
        """The grant of stored key `key_id` while it is active, else None (revoked,
        expired, gone). The inspector's sessions remember a key by its id, never its
        secret, and ask this on every request: read through the same cache as `verify`,
        a revocation ends them within CACHE_S."""
        row = self._row(key_id)
        if row is None or state_of(row, self.clock()) != "active":
            return None
        self._touch(key_id)
        return grant_of(row)

    def _row(self, key_id: str) -> ApiKeyRow | None:
        entry = self._rows.get(key_id)
        if entry is None or self._ticks() - entry.read_at > CACHE_S:
            with unit_of_work(self.url) as session:
                row = store.key_by_id(session, key_id)
                if row is not None:
                    session.expunge(row)
            entry = _Cached(row, self._ticks())
            if len(self._rows) >= CACHE_MAX:
                self._rows.clear()
            self._rows[key_id] = entry
        return entry.row

    def _touch(self, key_id: str) -> None:
        """Record the key's use, at most once per TOUCH_S in this process."""
        if self._touch_due(key_id):
            self._touched[key_id] = self._ticks()
            now = self.clock()
            one_statement(self.url, lambda session: store.touch(session, key_id, now=now))

    def _grant(self, row: ApiKeyRow | None, secret: str) -> KeyGrant | None:
        if row is None or not secrets.same_hash(
            secrets.hash_secret(secret, self._pepper), row.key_hash
        ):
            return None
        return grant_of(row) if state_of(row, self.clock()) == "active" else None

    def _bootstrap_grant(self, token: str) -> KeyGrant | None:
        raw = token.encode()
        matches = [(hmac.compare_digest(raw, s.encode()), name) for s, name in self._bootstrap]
        names = [name for matched, name in matches if matched]
        return KeyGrant(name=names[0]) if raw and names else None

    def _touch_due(self, key_id: str) -> bool:
        return self._ticks() - self._touched.get(key_id, -TOUCH_S) >= TOUCH_S

    def _is_open(self) -> bool:
        entry = self._open
        if entry is None or self._ticks() - entry[1] > CACHE_S:
            with unit_of_work(self.url) as session:
                made = store.any_key_exists(session)
            entry = (not made, self._ticks())
            self._open = entry
        return entry[0]

    def closed(self) -> bool:
        """Whether requests need a key: a bootstrap key is set or a key was ever made."""
        return bool(self._bootstrap) or not self._is_open()

    def forget_cache(self) -> None:
        """Drop what this process knows (a key changed here is seen at once)."""
        with self._lock:
            self._rows.clear()
            self._open = None

    # ------------------------------------------------------------------ managing keys

    def create(
        self,
        name: str,
        *,
        scopes: Sequence[str] = ("read", "write"),
        users: Sequence[str] = (),
        expires_at: datetime | None = None,
        rate_per_s: float | None = None,
        burst: int | None = None,
    ) -> NewKey:
        """A new key; its secret is in the answer and nowhere else."""
        now = self.clock()
        if expires_at is not None and expires_at <= now:
            raise InvalidInputError("the expiry is in the past; give a later time")
        if rate_per_s is not None and rate_per_s < 0:
            raise InvalidInputError("rate_per_s is 0 (unlimited) or more")
        if burst is not None and burst < 1:
            raise InvalidInputError("burst is 1 or more")
        key_id, secret, key = secrets.new_key()
        row = ApiKeyRow(
            id=key_id,
            name=check_name(name),
            key_hash=secrets.hash_secret(secret, self._pepper),
            scopes=sorted(parse_scopes(scopes), key=SCOPES.index),
            users=list(parse_patterns(users)),
            rate_per_s=rate_per_s,
            burst=burst,
            created_at=now,
            expires_at=expires_at,
        )
        with unit_of_work(self.url) as session:
            store.add_key(session, row)
        self.forget_cache()
        return NewKey(key=key, info=info_of(row, now))

    def all_keys(self) -> list[KeyInfo]:
        now = self.clock()
        with unit_of_work(self.url) as session:
            return [info_of(row, now) for row in store.all_keys(session)]

    def revoke(self, name_or_id: str) -> list[KeyInfo]:
        """Revoke the key of that id, or every unrevoked key of that name (a rotation
        leaves two); the revoked ones. 404 when there is none."""
        now = self.clock()
        with unit_of_work(self.url) as session:
            rows = [r for r in store.keys_named(session, name_or_id) if r.revoked_at is None]
            if not rows:
                raise NotFoundError(f"no unrevoked key named {name_or_id!r} (memlane keys list)")
            for row in rows:
                row.revoked_at = now
            infos = [info_of(row, now) for row in rows]
        self.forget_cache()
        return infos

    def rotate(self, name_or_id: str, *, grace: timedelta) -> NewKey:
        """A new key like the newest active one of that name or id (scopes, users, rate,
        and as long a lifetime); the old active ones stay valid for `grace`, then expire."""
        now = self.clock()
        with unit_of_work(self.url) as session:
            live = [
                r for r in store.keys_named(session, name_or_id) if state_of(r, now) == "active"
            ]
            if not live:
                raise NotFoundError(f"no active key named {name_or_id!r} (memlane keys list)")
            model = live[-1]
            lifetime = model.expires_at - model.created_at if model.expires_at else None
            ends = now + grace
            for row in live:
                row.expires_at = ends if row.expires_at is None else min(row.expires_at, ends)
            key_id, secret, key = secrets.new_key()
            row = ApiKeyRow(
                id=key_id,
                name=model.name,
                key_hash=secrets.hash_secret(secret, self._pepper),
                scopes=list(model.scopes),
                users=list(model.users),
                rate_per_s=model.rate_per_s,
                burst=model.burst,
                created_at=now,
                expires_at=now + lifetime if lifetime is not None else None,
            )
            store.add_key(session, row)
            info = info_of(row, now)
        self.forget_cache()
        return NewKey(key=key, info=info)


def stored_keys_guard(url: str) -> bool:
    """True when the store at `url` holds keys, so a server without MEMLANE_API_KEYS is
    not open; False when it holds none or cannot be read now (the caller then refuses
    an open server as before)."""
    try:
        return Keyring(url).closed()
    except Exception:  # the database down or not migrated: no keys known
        return False


def parse_duration(text: str) -> timedelta:
    """`90s`, `15m`, `12h`, `30d` (or a bare number of seconds)."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    text = text.strip().lower()
    number, unit = (text[:-1], text[-1]) if text[-1:] in units else (text, "s")
    try:
        value = float(number)
    except ValueError:
        raise InvalidInputError(
            f"{text!r} is not a duration: give a number and s, m, h or d (90s, 12h, 30d)"
        ) from None
    if value < 0:
        raise InvalidInputError(f"{text!r}: a duration is not negative")
    return timedelta(seconds=value * units[unit])


def parse_expiry(text: str, *, now: datetime) -> datetime:
    """A duration from now (`30d`) or an ISO 8601 time (UTC when no offset is given)."""
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        return now + parse_duration(text)
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
