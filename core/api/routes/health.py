"""Probes: ``/healthz`` (the process answers) and ``/readyz`` (the database and the broker are reachable)."""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy import text

from calsync.core.api.auth import Services
from calsync.core.api.models import Health
from calsync.core.api.problems import ProblemError, problems

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health, summary="Liveness")
def healthz() -> Health:
    """The process serves requests (no dependency is touched)."""
    return Health(status="ok")


@router.get("/readyz", response_model=Health, responses=problems(503), summary="Readiness")
def readyz(deps: Services) -> Health:
    """Every dependency answers; 503 names those that do not."""

    def database() -> None:
        with deps.db.read() as conn:
            conn.execute(text("SELECT 1"))

    checks = {"database": database, **deps.checks}
    failed = []
    for name, check in checks.items():
        try:
            check()
        except Exception as exc:
            failed.append(f"{name}: {type(exc).__name__}")
    if failed:
        raise ProblemError(503, "not-ready", "Service Unavailable", "unreachable: " + ", ".join(failed))
    return Health(status="ok", checks=dict.fromkeys(checks, "ok"))
