"""Replay or discard every open dead letter a filter matches: confirm the count, then watch the progress.

The confirmation page states how many open records the filter matches now and carries the filter and that count
to its form; the action starts only if the count is the same when the form comes back (else the page says how it
changed and asks again). The action then runs in batches (core.console.bulk) and its page shows how far it got,
refreshing itself (a meta refresh: no JavaScript needed) while it runs; its state is in Redis, so a reload, another
serve process or a later visit shows the same. An action whose process ended can be resumed from where it stopped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, get_args

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import RedirectResponse
from starlette.responses import Response

from calsync.core.console.auth import Acting, SignedIn
from calsync.core.console.bulk import ACTIONS, Action, BulkAction, describe, filter_of, number
from calsync.core.console.pages.filters import choice
from calsync.core.console.services import Console
from calsync.core.console.templating import redirect, render
from calsync.core.model.calendar import ProviderName
from calsync.core.model.vocabulary import DEAD_LETTER_KINDS
from calsync.core.store import dead_letters

router = APIRouter()
REFRESH_SECONDS = 2
# The selection's fields: the list page's query, the filter form's inputs. Choices where the values are fixed.
CRITERIA: Final = ("tenant_id", "account_id", "provider", "kind", "error_class", "q", "status")
CHOICES: Final[Mapping[str, tuple[str, ...]]] = {
    "provider": get_args(ProviderName),
    "kind": DEAD_LETTER_KINDS,
    "status": ("open", "replayed", "discarded", "all"),
}
MAX_LENGTH: Final = {"error_class": 128, "q": 200}  # the others are ids: 128


def _action(value: object) -> Action:
    for action in ACTIONS:
        if value == action:
            return action
    raise HTTPException(400, f"action must be one of {', '.join(ACTIONS)}")


def selection(values: Mapping[str, object]) -> dict[str, str]:
    """The selection in ``values`` (a page's query or a form): its non-empty fields; ``status`` defaults to open. A
    wrong value is 400 naming the field, never dropped: dropping a condition would widen a bulk action."""
    found: dict[str, str] = {}
    for name in CRITERIA:
        given = values.get(name)
        value = given.strip() if isinstance(given, str) else ""
        if not value:
            continue
        limit = MAX_LENGTH.get(name, 128)
        if len(value) > limit or "\x00" in value:
            raise HTTPException(400, f"{name} must be at most {limit} characters, without NUL")
        if name in CHOICES:
            choice(name, value, CHOICES[name])  # 400 for any other value
        found[name] = value
    return found


@router.get("/dead-letters/bulk", name="dead_letters_bulk")
def confirm_page(request: Request, console: Console, operator: SignedIn) -> Response:
    """How many open records the filter matches now, and (for an operator) the form that acts on exactly them."""
    action, criteria = _action(request.query_params.get("action")), selection(request.query_params)
    with console.api.db.read() as conn:
        count, _ = dead_letters.tally(conn, filter_of(criteria, open_only=True))
    context = {
        "title": f"{action.capitalize()} dead letters",
        "action": action,
        "criteria": criteria,
        "described": describe(criteria),
        "count": count,
        "changed_from": number(request.query_params.get("changed_from")),
        "back": request.url_for("dead_letters").include_query_params(**criteria),
    }
    return render(request, "dead_letter_confirm.html", context)


@router.post("/dead-letters/bulk", name="dead_letters_bulk_start")
async def start(request: Request, console: Console, operator: Acting) -> RedirectResponse:
    """Start the confirmed action if the filter still matches the count confirmed; else confirm again."""
    form = await request.form()
    action, criteria, seen = _action(form.get("action")), selection(form), number(form.get("seen"))
    if seen is None:
        raise HTTPException(400, "seen must be the count the confirmation stated")
    with console.api.db.read() as conn:
        count, up_to_id = dead_letters.tally(conn, filter_of(criteria, open_only=True))
    if count != seen or count == 0:
        return redirect(request.url_for("dead_letters_bulk"), action=action, **criteria, changed_from=seen)
    bulk = console.bulk.start(action, operator.name, criteria, total=count, up_to_id=up_to_id)
    return redirect(request.url_for("dead_letters_bulk_progress", bulk_id=bulk.id))


def _bulk(console: Console, bulk_id: str) -> BulkAction:
    bulk = console.bulk.get(bulk_id)
    if bulk is None:
        raise HTTPException(404, "There is no such bulk action (they are kept for a week).")
    return bulk


@router.get("/dead-letters/bulk/{bulk_id}", name="dead_letters_bulk_progress")
def progress_page(request: Request, console: Console, operator: SignedIn, bulk_id: str) -> Response:
    """How far a bulk action got: handled of the total, changed, skipped and why; refreshed while it runs."""
    bulk = _bulk(console, bulk_id)
    running = bulk.finished_at is None and console.bulk.running(bulk_id)
    context = {
        "title": f"{bulk.action.capitalize()} dead letters",
        "bulk": bulk,
        "described": describe(bulk.criteria),
        "running": running,
        "stalled": bulk.finished_at is None and not running,
        "refresh": REFRESH_SECONDS if running else None,
        "back": request.url_for("dead_letters").include_query_params(**bulk.criteria),
    }
    return render(request, "dead_letter_progress.html", context)


@router.post("/dead-letters/bulk/{bulk_id}/resume", name="dead_letters_bulk_resume")
def resume(request: Request, console: Console, operator: Acting, bulk_id: str) -> RedirectResponse:
    """Run a stopped bulk action on from where it stopped (in this process), unless it finished or runs."""
    if _bulk(console, bulk_id).finished_at is None:
        console.bulk.resume(bulk_id)
    return redirect(request.url_for("dead_letters_bulk_progress", bulk_id=bulk_id))
