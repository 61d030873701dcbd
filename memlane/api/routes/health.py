"""Health: Prometheus metrics, liveness (/healthz) and readiness (/readyz), outside /v1."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from memlane.api.deps import PUBLIC, metrics_of, needs, require_key, runtime_of
from memlane.api.errors import ErrorOut, error_response
from memlane.pipeline import error_codes as codes
from memlane.service.readiness import check_database

router = APIRouter(tags=["health"])


@router.get(
    "/metrics",
    dependencies=[Depends(require_key), needs("admin")],
    response_class=PlainTextResponse,
    responses={status: {"model": ErrorOut} for status in (401, 403, 429)},
)
def prometheus_metrics(request: Request) -> Response:
    """Prometheus metrics: request latency per route, assemblies, enqueues, and job
    figures read from the store (memlane.api.metrics)."""
    return metrics_of(request).render()


@router.get("/healthz", dependencies=[PUBLIC])
async def healthz() -> dict[str, str]:
    """The process is alive (no dependency is checked)."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"model": ErrorOut}}, dependencies=[PUBLIC])
def readyz(request: Request) -> JSONResponse:
    """What the API itself needs: the database reachable and its schema current (503
    not_ready otherwise). Workers and the broker are /v1/status's: with none, contexts
    are still assembled, so that must not take the API out of rotation."""
    checks = check_database(runtime_of(request).settings.resolved_database_url)
    failed = {name: state for name, state in checks.items() if state != "ok"}
    if failed:
        message = "not ready: " + "; ".join(f"{k}: {v}" for k, v in failed.items())
        return error_response(codes.NOT_READY, message, checks=checks)
    return JSONResponse({"status": "ready", "checks": checks})
