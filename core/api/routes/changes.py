"""``POST /v1/changes``: save the intent, enqueue its jobs, answer 202 with the receipt."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Header, Request

from calsync.core.api.auth import Submitter, services
from calsync.core.api.models import ReceiptOut
from calsync.core.api.problems import AUTHENTICATED, problems
from calsync.core.model.change import Change

router = APIRouter(tags=["changes"])

IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=255,
        pattern=r"^[\x21-\x7e]+$",
        description="Makes a retry return the first receipt (kept CALSYNC_REQUEST_KEY_TTL seconds per tenant); "
        "another change under the same key is 422.",
    ),
]


@router.post(
    "/v1/changes",
    status_code=202,
    response_model=ReceiptOut,
    responses=problems(400, *AUTHENTICATED),
    summary="Submit a change to one event",
)
def submit_change(
    request: Request,
    change: Annotated[Change, Body()],
    principal: Submitter,
    idempotency_key: IdempotencyKey = None,
) -> ReceiptOut:
    """202 once the new version and every affected target are committed; jobs enqueued after the commit.

    An enqueue that fails after the commit still answers 202, listing the account in ``deferred_accounts``:
    the target stays pending and the reconciler enqueues it.
    """
    receipt = services(request).intake.submit(
        principal.tenant_id, change, trace_id=request.state.trace_id, request_key=idempotency_key
    )
    return ReceiptOut.model_validate(receipt.as_json())
