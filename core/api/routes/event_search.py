"""``GET /v1/events``: the tenant's targets by state, account, event, provider and time, in keyset pages, newest
first, each filter read through an index (core/store/job_lookup.py)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from calsync.core.api.auth import Reader, Services
from calsync.core.api.cursors import key_of, one_page
from calsync.core.api.models import TargetHit, TargetPage, TargetQuery
from calsync.core.api.problems import AUTHENTICATED, problems
from calsync.core.store import job_lookup
from calsync.core.store.job_lookup import TargetSearch

router = APIRouter(tags=["events"])


@router.get("/v1/events", response_model=TargetPage, responses=problems(*AUTHENTICATED), summary="Search targets")
def search_targets(deps: Services, principal: Reader, query: Annotated[TargetQuery, Query()]) -> TargetPage:
    """The key's tenant's targets (one event in one account each) matching every filter given, with their state and
    latest job, most recently updated first."""
    search = TargetSearch(principal.tenant_id, **query.model_dump(exclude={"limit", "cursor"}))
    after = key_of(query.cursor, job_lookup.keyset_of)
    with deps.db.read() as conn:
        found = job_lookup.search(conn, search, after=after, limit=query.limit + 1)
    items, cursor = one_page(found, query.limit, job_lookup.keyset_json)
    return TargetPage(items=[TargetHit.of(row) for row in items], next_cursor=cursor)
