"""A user's soul blocks and procedures: set, listed and deleted."""

from __future__ import annotations

from fastapi import Response

from memlane.api.deps import Lane, UserId, needs, v1_router
from memlane.models.api_schemas import ProcedureIn, SoulIn
from memlane.pipeline.records import Procedure, SoulBlock, SoulKind

router = v1_router()


@router.put("/users/{user_id}/soul/{kind}", tags=["soul"], dependencies=[needs("write")])
def put_soul_block(user_id: UserId, kind: SoulKind, body: SoulIn, lane: Lane) -> SoulBlock:
    return lane.set_soul_block(user_id, kind, body.content)


@router.get("/users/{user_id}/soul", tags=["soul"], dependencies=[needs("read")])
def list_soul_blocks(user_id: UserId, lane: Lane) -> list[SoulBlock]:
    return lane.soul_blocks(user_id)


@router.delete(
    "/users/{user_id}/soul/{kind}", status_code=204, tags=["soul"], dependencies=[needs("write")]
)
def delete_soul_block(user_id: UserId, kind: SoulKind, lane: Lane) -> Response:
    """Delete the user's soul block of that kind; 404 if they have none."""
    lane.delete_soul_block(user_id, kind)
    return Response(status_code=204)


@router.post(
    "/users/{user_id}/procedures",
    status_code=201,
    tags=["procedures"],
    dependencies=[needs("write")],
)
def add_procedure(user_id: UserId, body: ProcedureIn, lane: Lane) -> Procedure:
    return lane.add_procedure(user_id, body.name, body.content)


@router.get("/users/{user_id}/procedures", tags=["procedures"], dependencies=[needs("read")])
def list_procedures(user_id: UserId, lane: Lane) -> list[Procedure]:
    return lane.procedures(user_id)


@router.delete(
    "/users/{user_id}/procedures/{procedure:path}",
    status_code=204,
    tags=["procedures"],
    dependencies=[needs("write")],
)
def delete_procedure(user_id: UserId, procedure: str, lane: Lane) -> Response:
    """Delete the user's procedure named by its id or its name."""
    lane.delete_procedure(user_id, procedure)
    return Response(status_code=204)
