"""The tenant's dead letters: list (filters, cursor pages), read one, replay or discard (ids or filter). Admin scope.

The console's dead letters page acts through the same services; these are its API twins for one tenant."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Path, Query

from calsync.core.api.auth import Admin, Services
from calsync.core.api.cursors import after_of, one_page
from calsync.core.api.models import (
    MAX_RECORD_ID,
    MAX_REPLAY,
    DeadLetterOut,
    DeadLetterPage,
    DeadLetterQuery,
    DiscardedOut,
    DiscardRequest,
    DiscardSetRequest,
    ReplayRequest,
)
from calsync.core.api.problems import AUTHENTICATED, ProblemError, existing, problems
from calsync.core.api.services import ApiServices
from calsync.core.model.dlq_reports import DiscardReportOut, ReplayReportOut, SkippedOut
from calsync.core.store import dead_letters
from calsync.core.store.dead_letters import DeadLetter, DeadLetterFilter

router = APIRouter(tags=["dead letters"])


@router.get(
    "/v1/dead-letters", response_model=DeadLetterPage, responses=problems(*AUTHENTICATED), summary="List dead letters"
)
def list_dead_letters(deps: Services, principal: Admin, query: Annotated[DeadLetterQuery, Query()]) -> DeadLetterPage:
    """The key's tenant's dead letters matching every filter given, oldest first."""
    selection = query.model_dump(exclude={"status", "limit", "cursor"})
    status = None if query.status == "all" else query.status
    flt = DeadLetterFilter(status=status, tenant_id=principal.tenant_id, **selection)
    with deps.db.read() as conn:
        found = dead_letters.page(conn, flt, after_id=after_of(query.cursor), limit=query.limit + 1)
    items, next_cursor = one_page(found, query.limit, lambda record: record.id)
    return DeadLetterPage(items=[DeadLetterOut.model_validate(r.as_json()) for r in items], next_cursor=next_cursor)


@router.get(
    "/v1/dead-letters/{record_id}",
    response_model=DeadLetterOut,
    responses=problems(404, *AUTHENTICATED),
    summary="Read one dead letter",
)
def get_dead_letter(
    deps: Services, principal: Admin, record_id: Annotated[int, Path(ge=1, le=MAX_RECORD_ID)]
) -> DeadLetterOut:
    """One record of the tenant, whatever its status: payload, error history, what operators did with it. Another
    tenant's record is answered exactly like a missing one (404)."""
    with deps.db.read() as conn:
        record = existing(dead_letters.get(conn, record_id, tenant_id=principal.tenant_id), f"dead letter {record_id}")
    return DeadLetterOut.model_validate(record.as_json())


@router.post(
    "/v1/dead-letters/replay",
    response_model=ReplayReportOut,
    responses=problems(400, *AUTHENTICATED),
    summary="Replay dead letters by ids or by filter",
)
def replay_dead_letters(
    deps: Services, principal: Admin, selection: Annotated[ReplayRequest, Body()]
) -> ReplayReportOut:
    """Re-enqueue open records of the tenant (at most 1000 per call); ids of other tenants are skipped as not found."""
    records, skipped = _selected(deps, principal.tenant_id, selection)
    report = deps.replay(records)
    report.skipped.extend(skipped)
    return report


@router.post(
    "/v1/dead-letters/discard",
    response_model=DiscardReportOut,
    responses=problems(400, *AUTHENTICATED),
    summary="Discard dead letters by ids or by filter",
)
def discard_dead_letters(
    deps: Services, principal: Admin, selection: Annotated[DiscardSetRequest, Body()]
) -> DiscardReportOut:
    """Close open records of the tenant without replaying them (at most 1000 per call), with one note on each; ids
    of other tenants are skipped as not found."""
    records, skipped = _selected(deps, principal.tenant_id, selection)
    report = deps.discard(records, selection.note)
    report.skipped.extend(skipped)
    return report


def _selected(deps: ApiServices, tenant_id: str, selection: ReplayRequest) -> tuple[list[DeadLetter], list[SkippedOut]]:
    """The tenant's records a selection names (open ones for a filter, at most 1000), and the ids not found."""
    with deps.db.read() as conn:
        if selection.filter is None:
            ids = dict.fromkeys(selection.ids or ())
            found = {i: dead_letters.get(conn, i, tenant_id=tenant_id) for i in ids}
        else:
            flt = DeadLetterFilter(status="open", tenant_id=tenant_id, **selection.filter.model_dump())
            found = {record.id: record for record in dead_letters.find(conn, flt, limit=MAX_REPLAY)}
    records = [record for record in found.values() if record is not None]
    return records, [SkippedOut(id=i, job_id=None, why="not found") for i, record in found.items() if record is None]


@router.post(
    "/v1/dead-letters/{record_id}/discard",
    response_model=DiscardedOut,
    responses=problems(400, 404, 409, *AUTHENTICATED),
    summary="Discard one dead letter",
)
def discard_dead_letter(
    deps: Services,
    principal: Admin,
    record_id: Annotated[int, Path(ge=1, le=MAX_RECORD_ID)],
    body: Annotated[DiscardRequest | None, Body()] = None,
) -> DiscardedOut:
    """Close an open record of the tenant without replaying it."""
    with deps.db.read() as conn:
        record = existing(dead_letters.get(conn, record_id, tenant_id=principal.tenant_id), f"dead letter {record_id}")
    if not deps.discard([record], body.note if body else None).discarded:
        raise ProblemError(409, "conflict", "Conflict", f"dead letter {record_id} is not open")
    return DiscardedOut(id=record_id, status="discarded")
