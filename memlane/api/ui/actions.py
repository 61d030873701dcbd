"""The inspector's actions, each a POST with the session's CSRF token by a key with the
`write` scope (the sweep: `admin`, as the API asks), each through the
same use case as the API's route, recorded under the session's actor (`ui:<key actor>`)
in the memory's history, and logged (memlane.ui) for jobs, which keep no history."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import quote

from fastapi import APIRouter, Form, Response

from memlane.api.deps import Lane
from memlane.api.ui.access import require_user
from memlane.api.ui.routing import Editor, UiRoute, audit, back_to, require_scope
from memlane.pipeline.errors import InvalidInputError

router = APIRouter(prefix="/ui", route_class=UiRoute, include_in_schema=False)

Action = Literal["pin", "verify", "unpin", "quarantine", "forget", "restore"]
DONE = {
    "pin": "pinned",
    "verify": "verified",
    "unpin": "made a candidate again",
    "quarantine": "quarantined",
    "forget": "forgotten",
    "restore": "restored",
}


def _memory_page(user_id: str, memory_id: str) -> str:
    return f"/ui/users/{quote(user_id, safe='')}/memories/{quote(memory_id, safe='')}"


@router.post("/users/{user_id}/memories/{memory_id}/edit")
def edit_memory(
    viewer: Editor,
    lane: Lane,
    user_id: str,
    memory_id: str,
    content: Annotated[str, Form(max_length=10_000)] = "",
    category: Annotated[str, Form(max_length=40)] = "",
    importance: Annotated[str, Form(max_length=20)] = "",
) -> Response:
    require_user(viewer, user_id)
    try:
        weight = float(importance) if importance.strip() else None
    except ValueError:
        raise InvalidInputError(f"importance: a number from 0 to 1, not {importance!r}") from None
    lane.update_memory(
        user_id,
        memory_id,
        {"content": content.strip() or None, "category": category or None, "importance": weight},
        actor=viewer.ui_actor,
    )
    audit.info("%s edited memory %s of %s", viewer.ui_actor, memory_id, user_id)
    return back_to(_memory_page(user_id, memory_id), "edited")


@router.post("/users/{user_id}/memories/{memory_id}/{action}")
def act_on_memory(
    viewer: Editor, lane: Lane, user_id: str, memory_id: str, action: Action
) -> Response:
    require_user(viewer, user_id)
    actor = viewer.ui_actor
    if action == "pin":
        lane.pin(user_id, memory_id, actor=actor)
    elif action == "verify":
        lane.verify(user_id, memory_id, actor=actor)
    elif action == "unpin":
        lane.set_tier(user_id, memory_id, "candidate", actor=actor)
    elif action == "quarantine":
        lane.quarantine(user_id, memory_id, actor=actor)
    elif action == "forget":
        lane.forget(user_id, memory_id, actor=actor)
    else:
        lane.update_memory(user_id, memory_id, status="active", actor=actor)
    audit.info("%s %s memory %s of %s", actor, action, memory_id, user_id)
    return back_to(_memory_page(user_id, memory_id), DONE[action])


@router.post("/jobs/{job_id}/retry")
def retry_job(viewer: Editor, lane: Lane, job_id: str) -> Response:
    require_user(viewer, lane.job(job_id).user_id)
    lane.retry_job(job_id)
    audit.info("%s retried job %s", viewer.ui_actor, job_id)
    return back_to("/ui/jobs?status=queued", f"job {job_id} queued again")


@router.post("/jobs/sweep")
def sweep(viewer: Editor, lane: Lane) -> Response:
    require_scope(viewer, "admin")  # as POST /v1/jobs/sweep
    result = lane.sweep()
    audit.info("%s swept: %s", viewer.ui_actor, result)
    done = f"swept: {len(result.extract) + len(result.store)} jobs published again"
    return back_to("/ui/jobs?status=queued", done)
