"""Dead letters: the filtered list, one record whole, and replay or discard of one (bulk actions:
:mod:`dead_letter_bulk`, included in this router).

The list is newest first in keyset pages (``before``: the last id shown), read through the primary key walked
backwards, ``ix_dead_letters_tenant_status`` for a tenant's, and on PostgreSQL the trigram index
``ix_dead_letters_error_search`` for the error's text (core.store.dead_letters). One record's page lists the other
records of its target through ``ix_dead_letters_target`` and the target's own row by its primary key.

Replay and discard go through ``ApiServices`` (the code of ``POST /v1/dead-letters/replay`` and
``POST /v1/dead-letters/{id}/discard``); each writes one audit row (``dead_letters.replay`` /
``dead_letters.discard``) with the count it changed, 0 when the record was skipped (the reason in its detail).
"""

from __future__ import annotations

import json
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Request
from sqlalchemy import Connection
from starlette.datastructures import URL
from starlette.responses import Response

from calsync.core.api.models import MAX_RECORD_ID
from calsync.core.console.auth import Acting, SignedIn
from calsync.core.console.bulk import ACTIONS, Action, act, filter_of, number
from calsync.core.console.pages import dead_letter_bulk
from calsync.core.console.pages.dead_letter_bulk import CHOICES, selection
from calsync.core.console.services import Console
from calsync.core.console.target_history import dead_letter_subject
from calsync.core.console.templating import redirect, render
from calsync.core.store import audit, dead_letters, targets
from calsync.core.store.dead_letters import DeadLetter
from calsync.core.store.targets import TargetKey

router = APIRouter()
router.include_router(dead_letter_bulk.router)  # before /dead-letters/{id}: "bulk" is no id

PAGE = 50


def _before(request: Request) -> int | None:
    raw = request.query_params.get("before", "")
    before = number(raw, most=MAX_RECORD_ID)
    if raw and not before:
        raise HTTPException(400, "before must be a dead letter's id")
    return before or None


def list_url(request: Request, criteria: dict[str, str], **extra: str | int) -> URL:
    """The list page showing ``criteria`` (and ``extra``: a cursor, a message)."""
    return request.url_for("dead_letters").include_query_params(**criteria, **extra)


@router.get("/dead-letters", name="dead_letters")
def list_page(request: Request, console: Console, operator: SignedIn) -> Response:
    """The records matching the filter, newest first, a page at a time; the bulk actions for open ones."""
    criteria = selection(request.query_params)
    with console.api.db.read() as conn:
        found = dead_letters.page(
            conn, filter_of(criteria), after_id=_before(request), limit=PAGE + 1, newest_first=True
        )
    records = found[:PAGE]
    context = {
        "title": "Dead letters",
        "records": records,
        "criteria": criteria,
        "choices": CHOICES,
        "query": urlencode(criteria),
        "older": list_url(request, criteria, before=records[-1].id) if len(found) > PAGE else None,
        "actionable": criteria.get("status", "open") == "open",
        "done": console.bulk.flashed(request.query_params.get("done")),
    }
    return render(request, "dead_letters.html", context)


@router.get("/dead-letters/{record_id}", name="dead_letter")
def record_page(request: Request, console: Console, operator: SignedIn, record_id: str) -> Response:
    """One record whole: its error, its history and its target's, its payload and a quarantined message's body."""
    with console.api.db.read() as conn:
        record = _record(conn, record_id)
        others = dead_letters.same_target(conn, record)
        target = None
        if record.tenant_id and record.entity_id and record.account_id:
            target = targets.get_target(conn, TargetKey(record.tenant_id, record.entity_id, record.account_id))
    context = {
        "title": f"Dead letter {record.id}",
        "r": record,
        "others": others,
        "target": target,
        "payload": json.dumps(record.payload, indent=2, sort_keys=True, ensure_ascii=False, default=str),
        "raw_text": None if record.raw_body is None else record.raw_body.decode("utf-8", "backslashreplace"),
        "done": console.bulk.flashed(request.query_params.get("done")),
    }
    return render(request, "dead_letter.html", context)


def _record(conn: Connection, record_id: str) -> DeadLetter:
    """The dead letter the path's id names; anything else is no dead letter (404, an HTML page like every other error
    here)."""
    found = number(record_id, most=MAX_RECORD_ID)
    record = dead_letters.get(conn, found) if found else None
    if record is None:
        raise HTTPException(404, f"There is no dead letter {record_id[:40]}.")
    return record


@router.post("/dead-letters/{record_id}/{action}", name="dead_letter_action")
def act_on_one(request: Request, console: Console, operator: Acting, record_id: str, action: str) -> Response:
    """Replay or discard one record, then show the page it was acted on from (the list with its filter, or the
    record's own page: ``?from=record``) with what happened."""
    if action not in ACTIONS:
        raise HTTPException(404, f"No such action: {action}.")
    verb: Action = "replay" if action == "replay" else "discard"
    with console.api.db.read() as conn:
        record = _record(conn, record_id)
    if request.query_params.get("from") == "record":
        back = request.url_for("dead_letter", record_id=record.id)
    else:
        back = list_url(request, selection(request.query_params))
    changed, skipped = act(console.api, verb, [record], actor=operator.name)
    why = skipped[0].why if skipped else None
    with console.api.db.write() as conn:
        audit.record(conn, actor=operator.name, action=f"dead_letters.{verb}", subject=dead_letter_subject(record.id),
                     count=changed, detail=None if why is None else {"skipped": why})  # fmt: skip
    said = f"Dead letter {record.id} {verb}ed." if why is None else f"Dead letter {record.id} left: {why}."
    return redirect(back, done=console.bulk.flash(said))
