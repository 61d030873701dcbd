"""API keys over HTTP (admin keys only): made, listed, revoked and rotated, as `memlane
keys` does. A key limited to some users cannot manage keys even with admin: a key it made
could reach further than it does."""

from __future__ import annotations

from datetime import timedelta

from fastapi import Request

from memlane.api.deps import Key, needs, runtime_of, v1_router
from memlane.api.errors import ApiError
from memlane.models.key_schemas import KeyCreate, KeyInfo, KeyRotate, NewKey
from memlane.pipeline import error_codes as codes
from memlane.service.keys.keyring import Keyring
from memlane.service.keys.reach import KeyGrant

router = v1_router()
ADMIN = [needs("admin")]


def _keyring(request: Request, key: KeyGrant) -> Keyring:
    if not key.reaches_all:
        raise ApiError(
            codes.FORBIDDEN,
            f"key {key.name} reaches only some users; managing keys needs an admin key "
            "that reaches every user",
        )
    return runtime_of(request).keyring()


@router.get("/keys", tags=["keys"], dependencies=ADMIN)
def list_keys(request: Request, key: Key) -> list[KeyInfo]:
    """Every stored key (MEMLANE_API_KEYS are not listed): never its secret or hash."""
    return _keyring(request, key).all_keys()


@router.post("/keys", status_code=201, tags=["keys"], dependencies=ADMIN)
def create_key(body: KeyCreate, request: Request, key: Key) -> NewKey:
    """A new key; `key` in the answer is its secret, shown this once."""
    keyring = _keyring(request, key)
    expires = keyring.clock() + timedelta(seconds=body.expires_in_s) if body.expires_in_s else None
    return keyring.create(
        body.name,
        scopes=body.scopes,
        users=body.users,
        expires_at=expires,
        rate_per_s=body.rate_per_s,
        burst=body.burst,
    )


@router.post("/keys/{name_or_id}/revoke", tags=["keys"], dependencies=ADMIN)
def revoke_key(name_or_id: str, request: Request, key: Key) -> list[KeyInfo]:
    """Revoke the key of that id, or every unrevoked key of that name; refused at once in
    this process, within seconds in the others."""
    return _keyring(request, key).revoke(name_or_id)


@router.post("/keys/{name_or_id}/rotate", status_code=201, tags=["keys"], dependencies=ADMIN)
def rotate_key(
    name_or_id: str, request: Request, key: Key, body: KeyRotate | None = None
) -> NewKey:
    """A new secret for the key (same name, scopes, users and limit); the old one stays
    valid for the grace period (MEMLANE_KEY_ROTATION_GRACE_S unless given), then expires."""
    runtime = runtime_of(request)
    grace = body.grace_s if body is not None and body.grace_s is not None else None
    seconds = runtime.settings.key_rotation_grace_s if grace is None else grace
    return _keyring(request, key).rotate(name_or_id, grace=timedelta(seconds=seconds))
