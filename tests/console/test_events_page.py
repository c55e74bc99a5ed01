"""The console's events and jobs page against a live ``calsync serve``: what an operator finds by job id, trace id
and filters (every tenant's), each hit once across the "Older →" pages, a target's page with its error and dead
letter, and a cancel that dead-letters the job and is audited; a viewer has no cancel button and is refused.

Hits are read from the page as a person reads them: the rows of ``#results`` (``tr.hit``) and their cells.
"""

from __future__ import annotations

import datetime as dt
import html
import re
from html.parser import HTMLParser
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from calsync.core.model.vocabulary import JOB_STATES
from calsync.core.redis.pause import PauseSwitch
from calsync.core.store import dead_letters, targets
from calsync.core.store.dead_letters import DeadLetterRecord
from calsync.core.store.schema import audit_log
from calsync.core.store.targets import TargetKey
from tests.api.test_event_search import Setup, states  # noqa: F401 (the fixture: targets in every state)
from tests.console.conftest import ConsoleClient, form_token
from tests.support import Pipeline, utcnow

Hit = tuple[str, str, str]  # (tenant, event, account) of a row of #results


class _Rows(HTMLParser):
    """The text of each cell of the rows of one class, in order."""

    def __init__(self, row_class: str) -> None:
        super().__init__()
        self.row_class = row_class
        self.rows: list[list[str]] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr" and self.row_class in (dict(attrs).get("class") or "").split():
            self._row = []
        elif tag == "td" and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._row is not None and self._cell is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def rows_of(page: str, row_class: str) -> list[list[str]]:
    """The cells' text of the page's rows of class ``row_class``."""
    parser = _Rows(row_class)
    parser.feed(page)
    return parser.rows


def hits(page: str) -> list[Hit]:
    """The (tenant, event, account) of each hit of a results page."""
    return [(cells[0], cells[1], cells[2].split(" ")[0]) for cells in rows_of(page, "hit")]


def follow(http: httpx.Client, answer: httpx.Response) -> httpx.Response:
    """The page a 303 sends a browser to (its location is an absolute path, ``/console`` included)."""
    assert answer.status_code == 303, answer.text
    return http.get(http.base_url.join(answer.headers["location"]))


def every_page(http: httpx.Client, params: dict[str, str]) -> list[Hit]:
    """The hits of every page of a search, following "Older →" like a person."""
    seen: list[Hit] = []
    answer = http.get("/events", params=params)
    for _ in range(100):
        assert answer.status_code == 200, answer.text
        seen += hits(answer.text)
        older = re.search(r'id="older" rel="next" href="\?([^"]+)"', answer.text)
        if older is None:
            return seen
        answer = http.get("/events?" + html.unescape(older.group(1)))
    raise AssertionError("the pages never end")


def test_a_job_id_opens_its_targets_page(console_client: ConsoleClient, pipeline: Pipeline) -> None:
    account = pipeline.account(account_id="acc-a")
    receipt = pipeline.submit([account], entity_id="evt-job")
    [job_id] = receipt.job_ids
    http = console_client("viewer")
    found = http.get("/events", params={"job_id": job_id})
    unknown = http.get("/events", params={"job_id": "job-nobody-knows"})
    assert found.status_code == 303 and found.headers["location"] == "/console/events/tenant-1/evt-job"
    page = follow(http, found)
    assert page.status_code == 200 and 'id="target"' in page.text and job_id in page.text
    [target] = rows_of(page.text, "target")
    assert target[0].startswith("acc-a") and target[1].startswith("pending")
    assert unknown.status_code == 200 and hits(unknown.text) == [] and "No job job-nobody-knows" in unknown.text
    assert 'id="paused-note"' not in page.text


def test_a_pause_is_shown_as_what_holds_waiting_jobs(console_client: ConsoleClient, pipeline: Pipeline) -> None:
    account = pipeline.account(account_id="acc-a")
    pipeline.submit([account], entity_id="evt-p")
    PauseSwitch(pipeline.clients.redis, pipeline.clients.keys).pause("ops@host", "maintenance INC-7")
    http = console_client("viewer")
    for page in (http.get("/events/tenant-1/evt-p").text, http.get("/events").text):
        assert 'id="paused-note"' in page and "ops@host" in page and "maintenance INC-7" in page


def test_filters_narrow_the_hits_and_an_operator_sees_every_tenant(
    console_client: ConsoleClient,
    states: Setup,  # noqa: F811
) -> None:
    http = console_client("viewer")
    everyone = every_page(http, {})
    tenant_1 = every_page(http, {"tenant_id": "tenant-1"})
    retrying = every_page(http, {"tenant_id": "tenant-1", "status": "retrying"})
    shown_back = http.get("/events", params={"tenant_id": "tenant-1", "status": "retrying"}).text
    of_account = every_page(http, {"account_id": "acc-g"})
    failed = every_page(http, {"status": "dead-lettered", "provider": "google"})
    assert ("tenant-2", "evt-0", "acc-z") in everyone and len(everyone) == len(states) + 1
    assert sorted(tenant_1) == sorted(("tenant-1", *key) for key in states)
    assert retrying == [("tenant-1", "evt-0", "acc-a")]
    assert '<option value="retrying" selected>' in shown_back and 'value="tenant-1"' in shown_back  # the search shown
    assert sorted(of_account) == sorted(("tenant-1", *k) for k in states if k[1] == "acc-g")
    assert failed == [("tenant-1", "evt-2", "acc-g")]


def test_pages_of_any_search_from_the_form_hold_each_hit_once(
    console_client: ConsoleClient,
    pipeline: Pipeline,
    states: Setup,  # noqa: F811
    monkeypatch: Any,
) -> None:
    monkeypatch.setattr("calsync.core.console.pages.events.PAGE", 2)  # several pages from a few targets
    with pipeline.clients.db.read() as conn:
        stored = [row for tenant, entity in {("tenant-1", e) for e, _ in states} | {("tenant-2", "evt-0")}
                  for row in targets.list_targets(conn, tenant, entity)]  # fmt: skip
    stored.sort(key=lambda r: (r.updated_at, r.event_id, r.account_id), reverse=True)
    state = {("tenant-1", *key): value for key, value in states.items()} | {("tenant-2", "evt-0", "acc-z"): "pending"}
    provider = {"acc-a": "memory", "acc-b": "memory", "acc-g": "google", "acc-z": "memory"}
    times = sorted({f"{row.updated_at:%Y-%m-%dT%H:%M:%S}" for row in stored})
    text = st.sampled_from(["", " ", "x" * 200, "é", "<b>", "2026-13-40T99:00", "evt-0", "acc-a", "tenant-2"])
    http = console_client("viewer")

    @given(
        tenant=st.sampled_from(["", "tenant-1", "tenant-2", "tenant-9"]),
        status=st.sampled_from(["", *JOB_STATES]),
        account=st.sampled_from(["", "acc-a", "acc-g", "acc-z"]),
        event=st.sampled_from(["", "evt-0", "evt-2", "evt-9"]),
        kind=st.sampled_from(["", "memory", "google", "graph"]),
        after=st.sampled_from(["", *times]),
        noise=st.dictionaries(st.sampled_from(["status", "provider", "updated_before", "cursor", "tenant_id"]), text),
    )
    @settings(max_examples=30, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    def pages(tenant: str, status: str, account: str, event: str, kind: str, after: str, noise: dict[str, str]) -> None:
        chosen = {"tenant_id": tenant, "status": status, "account_id": account, "event_id": event, "provider": kind,
                  "updated_after": after}  # fmt: skip
        assert http.get("/events", params={**chosen, **noise}).status_code in (200, 400)  # never a 500
        since = dt.datetime.fromisoformat(after).replace(tzinfo=dt.UTC) if after else None
        expected = [(r.tenant_id, r.event_id, r.account_id) for r in stored
                    if tenant in ("", r.tenant_id) and status in ("", state[r.key]) and account in ("", r.account_id)
                    and event in ("", r.event_id) and kind in ("", provider[r.account_id])
                    and (since is None or r.updated_at >= since)]  # fmt: skip
        assert every_page(http, chosen) == expected, chosen

    pages()


def test_a_failed_targets_page_shows_its_error_and_dead_letter(
    console_client: ConsoleClient,
    pipeline: Pipeline,
    states: Setup,  # noqa: F811
) -> None:
    failed = TargetKey("tenant-1", "evt-2", "acc-g")
    row = pipeline.target(failed.event_id, failed.account_id)
    now = utcnow()
    record = DeadLetterRecord(
        job_id=row.job_id or "job-x", job_type="sync_calendar_event", message_id="m-1", queue="calendar",
        tenant_id=failed.tenant_id, entity_id=failed.event_id, account_id=failed.account_id, idempotency_key=None,
        trace_id="trace_console_1", payload={}, attempts=3, reason="permanent error", error_class="E",
        last_error="refused", error_history=[{"attempt": 1, "at": now.isoformat(), "error_class": "Timeout",
                                              "message": "first try timed out"}],
        first_failed_at=now, failed_at=now,
    )  # fmt: skip
    with pipeline.clients.db.write() as conn:
        dead_letters.insert(pipeline.clients.db, conn, record)
    http = console_client("viewer")
    page = http.get("/events/tenant-1/evt-2")
    by_trace = http.get("/events", params={"trace_id": "trace_console_1"})
    assert page.status_code == 200
    [target] = [cells for cells in rows_of(page.text, "target") if cells[0].startswith("acc-g")]
    assert target[1].startswith("dead-lettered") and "refused" in target[5] and target[4] == "3"
    history = page.text[page.text.index('id="history"') :]
    assert "first try timed out" in history and "refused" in history and "trace_console_1" in history
    assert by_trace.status_code == 303 and by_trace.headers["location"].endswith("/events/tenant-1/evt-2")
    assert http.get("/events/tenant-1/evt-nothing").status_code == 404


def _audit_rows(pipeline: Pipeline) -> list[tuple[str, str, str, int]]:
    """The audit log's rows of cancels (signing in writes rows too)."""
    with pipeline.clients.db.read() as conn:
        query = select(audit_log.c.actor, audit_log.c.action, audit_log.c.subject, audit_log.c.count)
        query = query.where(audit_log.c.action.like("jobs.%"))
        return [(actor, action, subject, count) for actor, action, subject, count in conn.execute(query)]


def test_an_operator_cancels_a_queued_job_and_the_audit_log_says_so(
    console_client: ConsoleClient, pipeline: Pipeline
) -> None:
    account = pipeline.account(account_id="acc-a")
    [job_id] = pipeline.submit([account], entity_id="evt-c").job_ids
    http = console_client("operator")
    page = http.get("/events/tenant-1/evt-c")
    assert 'class="cancel' in page.text
    form = {"csrf_token": form_token(page.text), "job_id": job_id, "note": "wrong calendar"}
    posted = http.post("/events/tenant-1/evt-c/cancel", data=form)
    assert posted.status_code == 303
    after = follow(http, posted)
    again = http.post("/events/tenant-1/evt-c/cancel", data={"csrf_token": form_token(page.text), "job_id": job_id})
    assert "cancelled" in after.text and 'id="done"' in after.text
    assert pipeline.target("evt-c", "acc-a").status == "failed"
    [record] = pipeline.dead_letters(tenant_id="tenant-1")
    assert record.job_id == job_id and "wrong calendar" in record.last_error
    [(actor, *what)] = _audit_rows(pipeline)
    assert actor in page.text and what == ["jobs.cancel", "target tenant-1/evt-c/acc-a", 1]  # who is signed in
    assert "jobs.cancel" in after.text  # the target's page shows the audit row about it
    assert again.status_code == 303 and "failed=not-cancellable" in again.headers["location"]
    assert len(_audit_rows(pipeline)) == 1  # a refused cancel changed nothing and records nothing


def test_a_job_of_another_event_is_not_cancelled_from_this_page(
    console_client: ConsoleClient, pipeline: Pipeline
) -> None:
    account = pipeline.account(account_id="acc-a")
    [other_job] = pipeline.submit([account], entity_id="evt-other").job_ids
    pipeline.submit([account], entity_id="evt-here")
    http = console_client("operator")
    page = http.get("/events/tenant-1/evt-here")
    posted = http.post("/events/tenant-1/evt-here/cancel", data={"csrf_token": form_token(page.text),
                                                                  "job_id": other_job})  # fmt: skip
    assert posted.status_code == 303 and "failed=unknown" in posted.headers["location"]
    assert pipeline.target("evt-other", "acc-a").status == "pending" and _audit_rows(pipeline) == []


def test_a_viewer_has_no_cancel_button_and_is_refused(console_client: ConsoleClient, pipeline: Pipeline) -> None:
    account = pipeline.account(account_id="acc-a")
    [job_id] = pipeline.submit([account], entity_id="evt-v").job_ids
    http = console_client("viewer")
    page = http.get("/events/tenant-1/evt-v")
    posted = http.post("/events/tenant-1/evt-v/cancel", data={"csrf_token": form_token(page.text), "job_id": job_id})
    assert page.status_code == 200 and 'class="cancel' not in page.text
    assert posted.status_code == 403
    assert pipeline.target("evt-v", "acc-a").status == "pending" and _audit_rows(pipeline) == []


def test_what_the_page_cannot_read_is_an_error_page_not_a_500(
    console_client: ConsoleClient, pipeline: Pipeline
) -> None:
    account = pipeline.account(account_id="acc-a")
    pipeline.submit([account], entity_id="evt-b")
    http = console_client("operator")
    token = form_token(http.get("/events/tenant-1/evt-b").text)
    forged = http.get("/events", params={"cursor": "after:not-a-keyset"})
    bad_state = http.get("/events", params={"status": "queued"})
    no_job = http.post("/events/tenant-1/evt-b/cancel", data={"csrf_token": token, "job_id": ""})
    for answer in (forged, bad_state, no_job):
        assert answer.status_code == 400 and answer.headers["content-type"].startswith("text/html"), answer.text
    assert "status" in bad_state.text and pipeline.target("evt-b", "acc-a").status == "pending"
