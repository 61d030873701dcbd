"""Whom a session may see: the one place the inspector asks it. Every page and action
about a user (and every list of users, packs and jobs) goes through `may_see_user`;
a user out of reach is not found (never forbidden), so a page tells nothing of users
the key cannot reach. The answer is the session's key grant's (`KeyGrant.can_reach`,
as the API asks it), looked up on each request by memlane.api.ui.routing."""

from __future__ import annotations

from memlane.api.ui.session import Session
from memlane.pipeline.errors import NotFoundError


def may_see_user(session: Session, user_id: str) -> bool:
    """Whether the session's key reaches `user_id`, as sent and as the store reads it
    (stripped), like the API's `reach`."""
    grant = session.grant
    if not user_id or grant is None:
        return False
    return grant.can_reach(user_id) and grant.can_reach(user_id.strip())


def require_user(session: Session, user_id: str) -> str:
    """`user_id`, or NotFoundError when the session may not see it."""
    if not may_see_user(session, user_id):
        raise NotFoundError(f"no user {user_id!r}")
    return user_id
