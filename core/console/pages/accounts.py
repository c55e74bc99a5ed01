"""The accounts page: every tenant's accounts with their status, breaker, newest error and outstanding targets, and
(for operators) disable/enable, the same store call as ``POST /v1/accounts/{id}/disable|enable``, audited.

Reads: one keyset page of accounts (``accounts.list_page``, with what they owe: core/store/account_overview.py
says which indexes) and, for the page's accounts,
their breakers in one Redis round trip per provider (``TrafficStore.account_circuits``).
"""

from __future__ import annotations

from typing import get_args
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Request
from starlette.responses import Response

from calsync.core.console.auth import Acting, SignedIn
from calsync.core.console.pages.filters import choice, identifier
from calsync.core.console.services import Console
from calsync.core.console.templating import redirect, render
from calsync.core.model.calendar import AccountStatus, ProviderName
from calsync.core.model.errors import AccountStatusConflict
from calsync.core.store import account_overview, accounts, audit
from calsync.core.store.accounts import StatusAction
from calsync.core.traffic import CircuitState

router = APIRouter()

PAGE_SIZE = 50
PROVIDERS: tuple[ProviderName, ...] = get_args(ProviderName)
STATUSES: tuple[AccountStatus, ...] = get_args(AccountStatus)
DONE = {  # what the post-redirect-get shows (?done=…): fixed messages, never text taken from the URL
    "disabled": "The account is disabled: its queued jobs are dead-lettered as they run, new changes are refused.",
    "enabled": "The account is enabled: new changes sync to it; replay its dead letters to catch up.",
    "unchanged": "The account was already in that status: nothing changed.",
}


@router.get("/accounts", name="accounts")
def accounts_page(
    request: Request,
    console: Console,
    operator: SignedIn,
    tenant_id: str | None = None,
    provider: str | None = None,
    status: str | None = None,
    after: str | None = None,
    done: str | None = None,
) -> Response:
    """One page of accounts, oldest id first, filtered by tenant, provider and status; "Next →" pages on."""
    tenant, last = identifier("tenant_id", tenant_id), identifier("after", after)
    kind, state = choice("provider", provider, PROVIDERS), choice("status", status, STATUSES)
    with console.api.db.read() as conn:
        found = accounts.list_page(conn, tenant_id=tenant, provider=kind, status=state, after=last, limit=PAGE_SIZE + 1)
        owed = account_overview.debts(conn, [account.id for account in found[:PAGE_SIZE]])
    chosen = {"tenant_id": tenant, "provider": kind, "status": state}
    rows = [(account, owed[account.id]) for account in found[:PAGE_SIZE]]
    breakers: dict[str, CircuitState] = {}
    for name in sorted({account.provider for account, _ in rows}):
        ids = [account.id for account, _ in rows if account.provider == name]
        breakers.update(console.traffic.account_circuits(name, ids))
    more = len(found) > PAGE_SIZE
    next_query = urlencode({**{k: v for k, v in chosen.items() if v}, "after": rows[-1][0].id}) if more else None
    context = {"title": "Accounts", "rows": rows, "breakers": breakers, "filters": chosen, "done": DONE.get(done or ""),
               "providers": PROVIDERS, "statuses": STATUSES, "next_query": next_query}  # fmt: skip
    return render(request, "accounts.html", context)


@router.post("/accounts/{account_id}/{verb}", name="account_status")
def set_status(request: Request, console: Console, operator: Acting, account_id: str, verb: StatusAction) -> Response:
    """``disable``: stop syncing to the account; its queued jobs are dead-lettered as ``account inactive`` when they
    run. ``enable``: sync to a disabled account again; its dead letters stay for a replay."""
    try:
        with console.api.db.write() as conn:
            changed = accounts.set_status(conn, account_id, verb)
            if changed is None:
                raise HTTPException(404, f"no account {account_id}")
            summary, did = changed
            audit.record(conn, actor=operator.name, action=f"accounts.{verb}", subject=f"account {account_id}",
                         count=int(did), detail={"tenant_id": summary.tenant_id, "status": summary.status})  # fmt: skip
    except AccountStatusConflict as exc:
        raise HTTPException(409, str(exc)) from exc
    return redirect(request.url_for("accounts"), tenant_id=summary.tenant_id, done=f"{verb}d" if did else "unchanged")
