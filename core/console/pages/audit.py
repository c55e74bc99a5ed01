"""The audit log page: every operator action, newest first, one actor's when filtered.

Keyset pages by id (the primary key; one actor's through ``ix_audit_log_actor`` (actor, id)): "Older →" carries the
last id shown as ``before``, so a page costs the same however deep it is and a new action never shifts one.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from calsync.core.console.auth import SignedIn
from calsync.core.console.pages.filters import free_text
from calsync.core.console.services import Console
from calsync.core.console.templating import render
from calsync.core.store import audit

router = APIRouter()

PAGE_SIZE = 50


@router.get("/audit", name="audit")
def audit_page(
    request: Request,
    console: Console,
    _operator: SignedIn,
    actor: Annotated[str | None, Query(max_length=256)] = None,
    before: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
) -> Response:
    """Up to :data:`PAGE_SIZE` actions older than ``before``, of ``actor`` when given."""
    actor = free_text("actor", actor)
    with console.api.db.read() as conn:
        entries = audit.page(conn, actor=actor, before=before, limit=PAGE_SIZE + 1)
    older = entries[PAGE_SIZE - 1].id if len(entries) > PAGE_SIZE else None
    context = {"title": "Audit log", "entries": entries[:PAGE_SIZE], "actor": actor or "", "older": older}
    return render(request, "audit.html", context)
