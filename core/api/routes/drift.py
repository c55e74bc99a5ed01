"""Drift as a tenant sees it: the findings of the sweeps in its calendars (cursor pages) and its drift policy.

Every route reads or writes the key's tenant only; another tenant's findings and policy are never visible. Reading
needs the ``read`` scope, setting the policy ``admin`` (it decides whether calsync rewrites the tenant's calendars).
The bodies: docs/PROTOCOL.md, "Drift".
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from fastapi import APIRouter, Body, Query
from pydantic import BaseModel, ConfigDict, Field

from calsync.core.api.auth import Admin, Reader, Services
from calsync.core.api.cursors import after_of, one_page
from calsync.core.api.models import PageQuery
from calsync.core.api.problems import AUTHENTICATED, problems
from calsync.core.drift import store
from calsync.core.model.drift import DriftAction, DriftKind, DriftPolicy

router = APIRouter(tags=["drift"])


class DriftFindingOut(BaseModel):
    """One drift a sweep found in an account's calendar, and what calsync did about it."""

    id: int
    account_id: str
    entity_id: str | None = Field(description="The event whose target drifted; null for an item no target owns.")
    external_id: str = Field(description="The provider's id of the item.")
    kind: DriftKind
    action: DriftAction = Field(description="reported (policy report) or repaired (policy enforce).")
    found_at: dt.datetime


class DriftFindingPage(BaseModel):
    """One page of findings, oldest first; pass ``next_cursor`` as ``cursor`` for the next page."""

    items: list[DriftFindingOut]
    next_cursor: str | None


class DriftFindingQuery(PageQuery):
    """The filter and page of ``GET /v1/drift/findings`` (an unknown parameter is refused, not ignored)."""

    kind: DriftKind | None = None


class DriftPolicyIn(BaseModel):
    """The tenant's new drift policy."""

    model_config = ConfigDict(extra="forbid")

    policy: DriftPolicy = Field(
        description="enforce: re-assert calsync's state and delete its orphans; report: record and notify "
        "(event.drifted) only; off: never sweep."
    )


class DriftPolicyOut(BaseModel):
    """The tenant's drift policy (``report`` until one is set)."""

    policy: DriftPolicy


@router.get("/v1/drift/findings", response_model=DriftFindingPage, responses=problems(*AUTHENTICATED),
            summary="List drift findings")  # fmt: skip
def list_findings(deps: Services, principal: Reader, query: Annotated[DriftFindingQuery, Query()]) -> DriftFindingPage:
    """The key's tenant's findings (of one kind, if given), oldest first."""
    with deps.db.read() as conn:
        found = store.list_findings(
            conn, tenant_id=principal.tenant_id, kind=query.kind, after_id=after_of(query.cursor), limit=query.limit + 1
        )
    items, next_cursor = one_page(found, query.limit, lambda finding: finding.id)
    findings = [DriftFindingOut.model_validate({**f.as_json(), "entity_id": f.event_id}) for f in items]
    return DriftFindingPage(items=findings, next_cursor=next_cursor)


@router.get("/v1/drift/policy", response_model=DriftPolicyOut, responses=problems(*AUTHENTICATED),
            summary="Read the tenant's drift policy")  # fmt: skip
def get_policy(deps: Services, principal: Reader) -> DriftPolicyOut:
    """The key's tenant's policy; ``report`` (the default) when none was set."""
    with deps.db.read() as conn:
        return DriftPolicyOut(policy=store.policy_of(conn, principal.tenant_id))


@router.put("/v1/drift/policy", response_model=DriftPolicyOut, responses=problems(400, *AUTHENTICATED),
            summary="Set the tenant's drift policy")  # fmt: skip
def put_policy(deps: Services, principal: Admin, body: Annotated[DriftPolicyIn, Body()]) -> DriftPolicyOut:
    """Set the key's tenant's policy; the next sweep of each of its accounts follows it (``off``: none is swept)."""
    with deps.db.write() as conn:
        store.set_policy(conn, principal.tenant_id, body.policy, now=dt.datetime.now(dt.UTC))
    return DriftPolicyOut(policy=body.policy)
