"""The webhooks page: every tenant's endpoints (status, who disabled one and why, the breaker's failures in a row)
and the recent deliveries (status, attempts, the last answer), read through the webhooks feature's seam.

Endpoints are few per tenant (each one registered by hand) and listed whole, oldest first, through
``ix_webhook_endpoints_tenant`` for one tenant's; deliveries are keyset pages, most recently changed first
(``core.webhooks.recent_deliveries`` says which index serves which filter).
"""

from __future__ import annotations

import datetime as dt
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from pydantic import TypeAdapter
from starlette.responses import Response

from calsync.core.api.cursors import one_page
from calsync.core.console.auth import SignedIn
from calsync.core.console.pages.filters import choice, identifier, resume_key
from calsync.core.console.services import Console
from calsync.core.console.templating import render
from calsync.core.model.vocabulary import OUTSTANDING_DELIVERY_STATUSES, WEBHOOK_DELIVERY_STATUSES
from calsync.core.webhooks import recent_deliveries

router = APIRouter()

PAGE_SIZE = 50
_KEY: TypeAdapter[tuple[dt.datetime, str, str]] = TypeAdapter(tuple[dt.datetime, str, str])  # a delivery's keyset


@router.get("/webhooks", name="webhooks")
def webhooks_page(  # one parameter per field of the filter form
    request: Request,
    console: Console,
    operator: SignedIn,
    tenant_id: str | None = None,
    endpoint_id: str | None = None,
    status: str | None = None,
    cursor: str | None = None,
) -> Response:
    """The endpoints (of a tenant) and one page of deliveries (of an endpoint, in a status; outstanding ones by
    default: what an operator looks for), most recently changed first; "Older →" pages on."""
    tenant, endpoint = identifier("tenant_id", tenant_id), identifier("endpoint_id", endpoint_id)
    chosen = choice("status", status, (*WEBHOOK_DELIVERY_STATUSES, "any"))
    statuses = WEBHOOK_DELIVERY_STATUSES if chosen == "any" else (chosen,) if chosen else OUTSTANDING_DELIVERY_STATUSES
    before = resume_key(cursor, _KEY.validate_python, "the cursor is not one this page made")
    endpoints = console.api.webhooks.list(tenant)
    with console.api.db.read() as conn:
        found = recent_deliveries(conn, statuses=statuses, endpoint_id=endpoint, before=before, limit=PAGE_SIZE + 1)
    deliveries, after = one_page(
        found, PAGE_SIZE, lambda d: [d.updated_at.isoformat(), d.notification_id, d.endpoint_id]
    )
    filters = {"tenant_id": tenant, "endpoint_id": endpoint, "status": chosen}
    next_query = urlencode({**{k: v for k, v in filters.items() if v}, "cursor": after}) if after else None
    context = {"title": "Webhooks", "endpoints": endpoints, "deliveries": deliveries, "next_query": next_query,
               "filters": filters, "statuses": ("", *WEBHOOK_DELIVERY_STATUSES, "any")}  # fmt: skip
    return render(request, "webhooks.html", context)
