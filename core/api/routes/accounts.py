"""Disabling and enabling an account of the key's tenant (what ``calsync accounts update --status`` does). Admin scope.

A disabled account takes no change (422 at the intake) and its queued jobs are dead-lettered as ``account
inactive`` when they run; enabling it makes it active again. An account being removed, or awaiting
re-authorization (enable), is 409: re-authorize it with new credentials (``calsync accounts update``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path

from calsync.core.api.auth import Admin, Services
from calsync.core.api.job_models import AccountOut
from calsync.core.api.problems import AUTHENTICATED, not_found, problems
from calsync.core.model.calendar import AccountStatus
from calsync.core.model.errors import AccountStatusConflict
from calsync.core.model.ids import Identifier
from calsync.core.store import accounts

router = APIRouter(tags=["accounts"])

AccountId = Annotated[Identifier, Path(description="The account's id.")]
# The statuses each action may leave, and the status it sets.
_ANSWERS = problems(404, 409, *AUTHENTICATED)
_FROM: dict[Literal["disable", "enable"], tuple[tuple[AccountStatus, ...], AccountStatus]] = {
    "disable": (("active", "needs_reauth", "disabled"), "disabled"),
    "enable": (("disabled", "active"), "active"),
}


def _set_status(deps: Services, tenant_id: str, account_id: str, action: Literal["disable", "enable"]) -> AccountOut:
    allowed, status = _FROM[action]
    with deps.db.write() as conn:
        current = accounts.get_summary(conn, account_id)
        if current is None or current.tenant_id != tenant_id:  # another tenant's account reads as absent
            raise not_found(f"account {account_id}")
        if current.status not in allowed:
            raise AccountStatusConflict(f"account {account_id} is {current.status}: it cannot be {action}d")
        summary = accounts.update_account(conn, account_id, status=status) if current.status != status else current
    return AccountOut.of(summary)


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
