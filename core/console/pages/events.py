"""Events and jobs: search every tenant's targets, open one event's targets and history, cancel a waiting job.

``GET /events`` is the search form ``#search`` (the names of ``GET /v1/events``' filters, any tenant) and its hits,
newest ``updated_at`` first, in keyset pages (core/store/job_lookup.py: one range per sync status of
``ix_event_targets_tenant_search``, ``ix_event_targets_account_search`` or, without a tenant or account,
``ix_event_targets_status_search``). A job id (``ix_event_targets_job``, ``dead_letters.job_id``) or a trace id
(``ix_dead_letters_trace``: a trace id is stored only with a dead letter, see job_lookup) that names one target
jumps to its event's page. ``GET /events/{tenant}/{event}`` shows the event, each target's state, wait reason and
until when, job and drift verification, and its history (core/console/target_history.py). ``POST
.../cancel`` cancels a queued or deferred job (``ApiServices.cancel``, the twin of ``POST /v1/jobs/{id}/cancel``),
audited ``jobs.cancel``. What each read costs at 1 M targets: docs/notes/console-search.md.
"""

from __future__ import annotations

import datetime as dt
import urllib.parse
from typing import Annotated, Any, get_args

from fastapi import APIRouter, Form, Request
from fastapi.exceptions import HTTPException
from pydantic import BaseModel, Field, TypeAdapter, ValidationError, field_serializer, field_validator, model_validator
from redis import RedisError
from sqlalchemy import Connection
from starlette.responses import Response

from calsync.core.api.cursors import one_page
from calsync.core.console.auth import Acting, SignedIn
from calsync.core.console.pages.filters import resume_key
from calsync.core.console.services import Console, ConsoleServices
from calsync.core.console.target_history import history, target_subject
from calsync.core.console.templating import redirect, render
from calsync.core.model.calendar import ProviderName
from calsync.core.model.errors import JobNotCancellable
from calsync.core.model.ids import Identifier
from calsync.core.model.vocabulary import JOB_STATES, JobState
from calsync.core.redis.pause import PauseState
from calsync.core.store import audit, events, job_lookup, targets
from calsync.core.store.targets import TargetKey, TargetRow

router = APIRouter()
PAGE = 50  # hits per page
HISTORY = 50  # dead letters, findings and audit rows shown of one event
_ID: TypeAdapter[str] = TypeAdapter(Identifier)
_BAD_CURSOR = "This page's cursor is not one the console made: start the search again."


class EventsQuery(BaseModel):
    """The search form's fields, as a browser sends them (an empty field is no filter; a time without an offset is
    UTC, as ``<input type="datetime-local">`` sends it; other parameters are ignored, as pydantic ignores them)."""

    tenant_id: Identifier | None = None
    job_id: Identifier | None = None
    trace_id: Identifier | None = None
    account_id: Identifier | None = None
    event_id: Identifier | None = None
    status: JobState | None = None
    provider: ProviderName | None = None
    updated_after: dt.datetime | None = None
    updated_before: dt.datetime | None = None
    cursor: str | None = Field(default=None, max_length=512)

    @model_validator(mode="before")
    @classmethod
    def _blank_is_none(cls, values: Any) -> Any:
        if isinstance(values, dict):
            return {name: value.strip() or None if isinstance(value, str) else value for name, value in values.items()}
        return values

    @field_validator("updated_after", "updated_before")
    @classmethod
    def _utc(cls, value: dt.datetime | None) -> dt.datetime | None:
        return value if value is None or value.utcoffset() is not None else value.replace(tzinfo=dt.UTC)

    def search(self) -> job_lookup.TargetSearch:
        """The store's search of these filters."""
        return job_lookup.TargetSearch(
            tenant_id=self.tenant_id, state=self.status, account_id=self.account_id, entity_id=self.event_id,
            provider=self.provider, since=self.updated_after, until=self.updated_before,
        )  # fmt: skip

    @field_serializer("updated_after", "updated_before")
    def _as_typed(self, value: dt.datetime | None) -> str | None:
        return None if value is None else f"{value:%Y-%m-%dT%H:%M:%S}"  # as <input type="datetime-local"> shows it

    def form(self) -> dict[str, str]:
        """The filters given, as the form shows them back and the next page's link carries them."""
        return {name: str(value) for name, value in self.model_dump(exclude={"cursor"}, exclude_none=True).items()}


def _query(request: Request) -> EventsQuery:
    try:
        return EventsQuery.model_validate(dict(request.query_params))
    except ValidationError as exc:
        wrong = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'query'}: {e['msg']}" for e in exc.errors())
        raise HTTPException(400, f"This search cannot be read: {wrong}") from exc


def event_url(request: Request, key: TargetKey | tuple[str, str]) -> str:
    """The path of the page of the event of ``key`` (a target's key, or a tenant and an event)."""
    tenant_id, event_id = key[0], key[1]
    return str(request.url_for("event_page", tenant_id=tenant_id, event_id=event_id).path)


def _jump(conn: Connection, query: EventsQuery) -> tuple[list[TargetKey], str | None]:
    """The targets a job id or trace id names (at most a page), and what the page should say when none."""
    if query.job_id is not None:
        found = job_lookup.find_job(conn, None, query.job_id)
        row, record = (found.target, found.dead_letter) if found else (None, None)
        if row is not None:
            return [row.key], None
        if record is not None and record.tenant_id and record.entity_id and record.account_id:
            return [TargetKey(record.tenant_id, record.entity_id, record.account_id)], None
        return [], f"No job {query.job_id} is known: it may have been superseded by a newer job of its target."
    assert query.trace_id is not None
    records = job_lookup.find_trace(conn, query.trace_id, limit=PAGE)
    keys = [TargetKey(r.tenant_id, r.entity_id, r.account_id) for r in records
            if r.tenant_id and r.entity_id and r.account_id]  # fmt: skip
    if keys:
        return list(dict.fromkeys(keys)), None
    return [], f"No dead letter carries trace {query.trace_id}: a trace id is stored only when a job of it failed."


def _shown(conn: Connection, rows: list[TargetRow]) -> list[dict[str, Any]]:
    """What each target's row shows: the target, its state, its account's provider and, for a dead-lettered one, the
    attempts its job's dead letter records (a waiting job's attempts are known only to its message on the queue)."""
    providers = job_lookup.providers_of(conn, {row.account_id for row in rows})
    attempts = job_lookup.attempts_of(conn, [row.job_id for row in rows if row.status == "failed" and row.job_id])
    return [{"row": row, "state": job_lookup.state_of(row), "provider": providers.get(row.account_id),
             "attempts": attempts.get(row.job_id or "")} for row in rows]  # fmt: skip


@router.get("/events", name="events")
def events_page(request: Request, console: Console, operator: SignedIn) -> Response:
    """The search form and a page of hits; a job id or trace id of one target opens its event's page."""
    query = _query(request)
    after = resume_key(query.cursor, job_lookup.keyset_of, _BAD_CURSOR)
    missing, cursor = None, None
    with console.api.db.read() as conn:
        if query.job_id is not None or query.trace_id is not None:
            keys, missing = _jump(conn, query)
            if len(keys) == 1:
                return redirect(event_url(request, keys[0]))
            rows = [row for row in (targets.get_target(conn, key) for key in keys) if row is not None]
        else:
            found = job_lookup.search(conn, query.search(), after=after, limit=PAGE + 1)
            rows, cursor = one_page(found, PAGE, job_lookup.keyset_json)
        hits = _shown(conn, rows)
    older = f"?{urllib.parse.urlencode({**query.form(), 'cursor': cursor})}" if cursor else None
    context = {"title": "Events and jobs", "query": query.form(), "hits": hits, "older": older, "missing": missing,
               "states": JOB_STATES, "providers": get_args(ProviderName), "paused": _paused(console)}  # fmt: skip
    return render(request, "events.html", context)


def _paused(console: ConsoleServices) -> PauseState | None:
    """The pause switch, which holds every waiting job whatever its target says; None when Redis cannot be read
    (the overview says so: this page still shows what the database holds)."""
    try:
        return console.pause.state()
    except RedisError:
        return None


_DONE = {"cancelled": "Job {job} cancelled: its target is dead-lettered; replay its dead letter to run the change."}
_FAILED = {
    "not-cancellable": "Job {job} was not cancelled: only a queued or deferred job can be (it runs, finished or is "
    "dead-lettered already; its target's state below says which).",
    "unknown": "Job {job} was not cancelled: it is not this event's latest job any more.",
}


@router.get("/events/{tenant_id}/{event_id}", name="event_page")
def event_page(request: Request, console: Console, operator: SignedIn, tenant_id: str, event_id: str) -> Response:
    """The event, its targets (state, wait reason and until when, job, errors, last verified) and their history."""
    with console.api.db.read() as conn:
        event = events.get_event(conn, tenant_id, event_id)
        rows = targets.shown_targets(conn, tenant_id, event_id)
        if event is None and not rows:
            raise HTTPException(404, f"Tenant {tenant_id} has no event {event_id}.")
        shown = _shown(conn, rows)
        past = history(conn, [row.key for row in rows], tenant_id, event_id, limit=HISTORY)
    job = request.query_params.get("job", "")
    done = _DONE.get(request.query_params.get("done", ""), "").format(job=job)
    failed = _FAILED.get(request.query_params.get("failed", ""), "").format(job=job)
    context = {"title": f"Event {event_id}", "tenant_id": tenant_id, "event_id": event_id, "event": event,
               "targets": shown, "history": past, "done": done, "failed": failed,
               "paused": _paused(console)}  # fmt: skip
    return render(request, "target.html", context)


@router.post("/events/{tenant_id}/{event_id}/cancel", name="cancel_job")
def cancel_job(
    request: Request,
    console: Console,
    operator: Acting,
    tenant_id: str,
    event_id: str,
    job_id: Annotated[str, Form()] = "",
    note: Annotated[str, Form(max_length=1024)] = "",
) -> Response:
    """Cancel the event's queued or deferred job ``job_id``: its target is dead-lettered (replayable), one audit row
    ``jobs.cancel`` says who did it; answered 303 to the event's page, which says what happened."""
    try:
        _ID.validate_python(job_id)
    except ValidationError as exc:
        raise HTTPException(400, "A job id is needed to cancel a job.") from exc
    page = event_url(request, (tenant_id, event_id))
    with console.api.db.read() as conn:
        found = job_lookup.find_job(conn, tenant_id, job_id)
    if found is None or found.target is None or found.target.event_id != event_id:
        return redirect(page, failed="unknown", job=job_id)  # not a job of this event's: nothing is cancelled
    key = found.target.key
    try:
        record = console.api.cancel(tenant_id, job_id, note.strip() or None)
    except JobNotCancellable:
        return redirect(page, failed="not-cancellable", job=job_id)
    if record is None:  # the target was removed meanwhile
        return redirect(page, failed="unknown", job=job_id)
    with console.api.db.write() as conn:  # the cancel committed itself: the row records what it reported
        audit.record(conn, actor=operator.name, action="jobs.cancel", subject=target_subject(key), count=1,
                     detail={"job_id": job_id, "dead_letter_id": record.id, "note": note.strip() or None})  # fmt: skip
    return redirect(page, done="cancelled", job=job_id)
