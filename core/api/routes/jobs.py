"""A job by its id, and cancelling a queued or deferred one (core/producer/job_cancel.py: its target is dead-lettered,
replayable like any dead letter). Reading needs the read scope; cancelling, admin."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Path

from calsync.core.api.auth import Admin, Reader, Services
from calsync.core.api.models import CancelledOut, CancelRequest, DeadLetterOut, JobOut
from calsync.core.api.problems import AUTHENTICATED, existing, problems
from calsync.core.model.ids import Identifier
from calsync.core.store import job_lookup

router = APIRouter(tags=["jobs"])

JobId = Annotated[Identifier, Path(description="A job id of a receipt, a replay report or a dead letter.")]


@router.get("/v1/jobs/{job_id}", response_model=JobOut, responses=problems(404, *AUTHENTICATED), summary="Read a job")
def get_job(deps: Services, principal: Reader, job_id: JobId) -> JobOut:
    """The tenant's job while it is its target's latest job or has a dead letter; another tenant's job, or one a
    newer job of its target superseded, is 404."""
    with deps.db.read() as conn:
        found = existing(job_lookup.find_job(conn, principal.tenant_id, job_id), f"job {job_id}")
    return JobOut.of(found)


@router.post(
    "/v1/jobs/{job_id}/cancel",
    response_model=CancelledOut,
    responses=problems(400, 404, 409, *AUTHENTICATED),
    summary="Cancel a queued or deferred job",
)
def cancel_job(
    deps: Services, principal: Admin, job_id: JobId, body: Annotated[CancelRequest | None, Body()] = None
) -> CancelledOut:
    """Dead-letter the job's target with cause ``cancelled`` (reason "cancelled by operator"): the change is kept,
    and replaying the record runs it. 409 when the job is running (cancel again once it waits), synced or
    dead-lettered already; a worker that gets the cancelled job's message acks it as stale."""
    record = existing(deps.cancel(principal.tenant_id, job_id, body.note if body else None), f"job {job_id}")
    return CancelledOut(
        job_id=job_id, state="dead-lettered", dead_letter=DeadLetterOut.model_validate(record.as_json())
    )
