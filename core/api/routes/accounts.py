"""Disabling and enabling an account of the key's tenant (what ``calsync accounts update --status`` does). Admin scope.

A disabled account takes no change (422 at the intake) and its queued jobs are dead-lettered as ``account
inactive`` when they run; enabling it makes it active again. An account being removed, or awaiting
re-authorization (enable), is 409: re-authorize it with new credentials (``calsync accounts update``).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from calsync.core.api.auth import Admin, Services
from calsync.core.api.models import AccountOut
from calsync.core.api.problems import AUTHENTICATED, existing, problems
from calsync.core.model.ids import Identifier
from calsync.core.store import accounts

router = APIRouter(tags=["accounts"])

AccountId = Annotated[Identifier, Path(description="The account's id.")]
_ANSWERS = problems(404, 409, *AUTHENTICATED)


def _set_status(deps: Services, tenant_id: str, account_id: str, action: accounts.StatusAction) -> AccountOut:
    with deps.db.write() as conn:
        # another tenant's account reads as absent
        changed = existing(accounts.set_status(conn, account_id, action, tenant_id=tenant_id), f"account {account_id}")
    return AccountOut.model_validate(changed[0].as_json())


@router.post("/v1/accounts/{account_id}/disable", response_model=AccountOut, responses=_ANSWERS,
             summary="Disable an account")  # fmt: skip
def disable_account(deps: Services, principal: Admin, account_id: AccountId) -> AccountOut:
    """Stop syncing to the account (idempotent: a disabled account stays so)."""
    return _set_status(deps, principal.tenant_id, account_id, "disable")


@router.post("/v1/accounts/{account_id}/enable", response_model=AccountOut, responses=_ANSWERS,
             summary="Enable an account")  # fmt: skip
def enable_account(deps: Services, principal: Admin, account_id: AccountId) -> AccountOut:
    """Sync to a disabled account again (idempotent: an active account stays so); replay its dead letters after."""
    return _set_status(deps, principal.tenant_id, account_id, "enable")
