"""The overview as an operator sees it: queues, the pause switch, breakers, a dependency down, and what pausing and
resuming change (the switch in Redis, the audit log in the database); a viewer sees no button and cannot act."""

from __future__ import annotations

import dataclasses
from collections import Counter
from html.parser import HTMLParser
from typing import Any

import httpx
import redis
from fastapi import FastAPI
from hypothesis import given
from hypothesis import strategies as st

from calsync.core.console.pages.overview import Spark, sparks
from calsync.core.messaging.messages import sync_message
from calsync.core.model.payload import new_payload
from calsync.core.model.vocabulary import Outcome
from calsync.core.observability.pipeline_state import StateReader
from calsync.core.redis.pause import PauseSwitch
from calsync.core.redis.stats import JobStats
from calsync.core.store import audit
from calsync.core.traffic import Limits, TrafficStore
from tests.console.conftest import ConsoleClient, console_of, form_token
from tests.support import Pipeline, closed_port, unchecked_clients


class _Page(HTMLParser):
    """A page's text by element id, a table's rows as cell texts, and which ids it has (standard library only)."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.hidden: set[str] = set()
        self.texts: dict[str, list[str]] = {}
        self.rows: dict[str, list[list[str]]] = {}
        self._open: list[tuple[str, str | None]] = []  # (tag, id) of each element open
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs).get("id")
        if found:
            self.ids.add(found)
            if any(name == "hidden" for name, _value in attrs):
                self.hidden.add(found)
            self.texts[found] = []
        if tag == "tr" and (table := self._within("table")):
            self.rows.setdefault(table, []).append([])
        if tag in ("td", "th") and (table := self._within("table")) and self.rows.get(table):
            self.rows[table][-1].append("")
        if tag not in ("input", "meta", "link", "br", "polyline"):
            self._open.append((tag, found))

    def handle_endtag(self, tag: str) -> None:
        while self._open and self._open.pop()[0] != tag:
            pass

    def handle_data(self, data: str) -> None:
        for _tag, found in self._open:
            if found:
                self.texts[found].append(data)
        if (table := self._within("table")) and self.rows.get(table) and self.rows[table][-1]:
            self.rows[table][-1][-1] += data.strip()

    def _within(self, tag: str) -> str | None:
        return next((found for t, found in reversed(self._open) if t == tag and found), None)

    def text(self, element_id: str) -> str:
        """The text inside the element, whitespace collapsed."""
        return " ".join(" ".join(self.texts[element_id]).split())

    def row(self, table: str, first_cell: str) -> list[str]:
        """The cells of the table's row whose first cell is ``first_cell``."""
        return next(cells for cells in self.rows[table] if cells and cells[0] == first_cell)


def _page(client: httpx.Client, path: str = "/overview") -> _Page:
    answer = client.get(path)
    assert answer.status_code == 200, answer.text
    return _Page(answer.text)


def _audit_rows(pipeline: Pipeline) -> list[audit.AuditEntry]:
    """The audit log's pipeline rows, newest first (signing in is audited too: left aside)."""
    with pipeline.clients.db.read() as conn:
        return [entry for entry in audit.page(conn) if entry.action.startswith("pipeline.")]


def test_the_page_shows_a_queues_depth_after_jobs_are_enqueued(
    pipeline: Pipeline, console_client: ConsoleClient
) -> None:
    queue = pipeline.settings.queue
    viewer = console_client("viewer")
    assert _page(viewer).row("queues", queue)[2] == "0"
    for n in range(3):
        payload = new_payload(tenant_id="tenant-1", entity_id=f"evt-{n}", account_id="acc-1", operation="create",
                              version=1, trace_id="overview")  # fmt: skip
        pipeline.broker.enqueue(sync_message(queue, payload))
    cells = _page(viewer).row("queues", queue)
    assert cells[1] == "sync jobs, normal lane" and cells[2] == "3"  # ready
    assert _page(viewer).text("paused") == "Running"


def test_a_paused_pipeline_is_shown_with_who_paused_it_and_why(
    pipeline: Pipeline, console_client: ConsoleClient
) -> None:
    PauseSwitch(pipeline.clients.redis, pipeline.clients.keys).pause("ops@host", "database upgrade")
    page = _page(console_client("viewer"))
    assert page.text("paused") == "Paused"
    assert "ops@host" in page.text("overview") and "database upgrade" in page.text("overview")


def test_an_open_breaker_is_shown_for_its_provider(pipeline: Pipeline, console_client: ConsoleClient) -> None:
    provider = next(name for name, failures in sorted(pipeline.settings.breaker_failures.items()) if failures)
    limits = Limits(breaker_failures=pipeline.settings.breaker_failures[provider], breaker_open=60)
    traffic = TrafficStore(pipeline.clients.redis, pipeline.clients.keys)
    viewer = console_client("viewer")
    assert _page(viewer).row("breakers", provider)[1] == "closed"
    for n in range(limits.breaker_failures):  # failures of as many accounts and events in a row open it
        call = traffic.admit(provider, f"acc-{n}", "tenant-1", limits, 0)
        traffic.settle(provider, f"acc-{n}", call, limits, "failure", event=f"tenant-1/evt-{n}")
    assert _page(viewer).row("breakers", provider)[1] == "open"


def test_a_dependency_down_is_named_and_the_other_sources_still_shown(
    pipeline: Pipeline, served_app: FastAPI, console_client: ConsoleClient, settings_factory: Any
) -> None:
    console = console_of(served_app)
    gone_url = f"redis://127.0.0.1:{closed_port()}/0"
    gone = unchecked_clients(settings_factory(redis_url=gone_url, broker_url=gone_url))  # Redis, and the broker in it
    try:
        console.state.console = dataclasses.replace(console.state.console, state=StateReader(gone))
        viewer = console_client("viewer")
        for path in ("/overview", "/overview/live"):
            page = _page(viewer, path)
            assert "stale" not in page.hidden and "Redis unreachable" in page.text("stale")
            assert page.text("paused") == "unknown" and "could not be read" in page.text("queues")
            assert "Open dead letters 0" in page.text("overview")  # the database was read
    finally:
        gone.close()


def test_redis_lost_after_the_state_was_read_is_named_too(
    pipeline: Pipeline, served_app: FastAPI, console_client: ConsoleClient
) -> None:
    console = console_of(served_app)
    gone = redis.Redis.from_url(f"redis://127.0.0.1:{closed_port()}/0")
    keys = pipeline.clients.keys
    try:  # the pause switch and the counters on a Redis that is gone, the state reader's still there
        services = dataclasses.replace(console.state.console, pause=PauseSwitch(gone, keys), stats=JobStats(gone, keys))
        console.state.console = services
        page = _page(console_client("viewer"))
        assert "stale" not in page.hidden and "Redis unreachable" in page.text("stale")
        assert page.text("paused") == "unknown"
        assert "n/a" in page.text("throughput")
    finally:
        gone.close()


def test_a_database_down_is_named_and_redis_still_shown(
    pipeline: Pipeline, served_app: FastAPI, console_client: ConsoleClient, settings_factory: Any
) -> None:
    console = console_of(served_app)
    nowhere = f"postgresql+psycopg://postgres@127.0.0.1:{closed_port()}/nowhere"
    gone = unchecked_clients(settings_factory(database_url=nowhere))
    try:
        console.state.console = dataclasses.replace(console.state.console, state=StateReader(gone))
        page = _page(console_client("viewer"))
        assert "stale" not in page.hidden and "PostgreSQL unreachable" in page.text("stale")
        assert page.text("paused") == "Running" and "breakers" in page.ids
    finally:
        gone.close()


def test_all_well_shows_no_stale_banner(console_client: ConsoleClient) -> None:
    assert "stale" in _page(console_client("viewer")).hidden


def test_an_operator_pauses_and_resumes_and_each_is_audited(pipeline: Pipeline, console_client: ConsoleClient) -> None:
    switch = PauseSwitch(pipeline.clients.redis, pipeline.clients.keys)
    operator = console_client("operator")
    page = operator.get("/overview")
    assert "pause" in _Page(page.text).ids and "resume" not in _Page(page.text).ids
    paused = operator.post("/overview/pause", data={"csrf_token": form_token(page.text), "reason": " deploy "})
    assert paused.status_code == 303 and paused.headers["location"].endswith("/console/overview?done=paused")
    state = switch.state()
    assert state is not None and (state.by, state.reason) == ("operator@example.test", "deploy")

    page = operator.get(paused.headers["location"])  # post-redirect-get: what happened, shown
    shown = _Page(page.text)
    assert "resume" in shown.ids and "pause" not in shown.ids and "Processing paused" in shown.text("done")
    resumed = operator.post("/overview/resume", data={"csrf_token": form_token(page.text)})
    assert resumed.status_code == 303 and resumed.headers["location"].endswith("?done=resumed")
    assert switch.state() is None

    rows = _audit_rows(pipeline)
    assert [(r.action, r.actor, r.count) for r in rows] == [
        ("pipeline.resume", "operator@example.test", 1), ("pipeline.pause", "operator@example.test", 1)]  # fmt: skip
    assert rows[1].detail == {"reason": "deploy", "by": "operator@example.test"}
    assert rows[0].detail == {"paused_by": "operator@example.test", "reason": "deploy"}


def test_pausing_a_paused_pipeline_keeps_the_first_pause_and_audits_no_change(
    pipeline: Pipeline, console_client: ConsoleClient
) -> None:
    switch = PauseSwitch(pipeline.clients.redis, pipeline.clients.keys)
    switch.pause("ops@host", "first")
    operator = console_client("operator")
    token = form_token(operator.get("/overview").text)
    answer = operator.post("/overview/pause", data={"csrf_token": token, "reason": "second"})
    assert answer.headers["location"].endswith("?done=already-paused")
    state = switch.state()
    assert state is not None and (state.by, state.reason) == ("ops@host", "first")
    assert [(r.action, r.count) for r in _audit_rows(pipeline)] == [("pipeline.pause", 0)]


def test_a_reason_the_audit_log_cannot_hold_is_refused_before_the_switch_moves(
    pipeline: Pipeline, console_client: ConsoleClient
) -> None:
    operator = console_client("operator")
    token = form_token(operator.get("/overview").text)
    answer = operator.post("/overview/pause", data={"csrf_token": token, "reason": "outage\x00"})
    assert answer.status_code == 400
    assert PauseSwitch(pipeline.clients.redis, pipeline.clients.keys).state() is None
    assert _audit_rows(pipeline) == []


def test_a_viewer_sees_no_buttons_and_is_refused_when_posting(
    pipeline: Pipeline, console_client: ConsoleClient
) -> None:
    switch = PauseSwitch(pipeline.clients.redis, pipeline.clients.keys)
    viewer = console_client("viewer")
    page = viewer.get("/overview")
    assert not {"pause", "resume"} & _Page(page.text).ids
    assert viewer.post("/overview/pause", data={"csrf_token": form_token(page.text)}).status_code == 403
    assert switch.state() is None
    switch.pause("ops@host", None)
    assert not {"pause", "resume"} & _Page(viewer.get("/overview").text).ids
    assert viewer.post("/overview/resume", data={"csrf_token": form_token(page.text)}).status_code == 403
    assert switch.state() is not None
    assert _audit_rows(pipeline) == []


def test_the_live_fragment_is_only_the_region(console_client: ConsoleClient) -> None:
    answer = console_client("operator").get("/overview/live")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/html")
    fragment = answer.text.strip()
    assert fragment.startswith('<section id="overview"') and fragment.endswith("</section>")
    shown = _Page(fragment)
    assert {"overview", "queues", "workers", "breakers", "paused", "updated-at", "stale"} <= shown.ids
    assert not {"pause", "resume", "who", "sign-out"} & shown.ids  # no controls, no navigation: only the region


def test_the_sparklines_count_jobs_ended_and_the_share_of_attempts_failed() -> None:
    minutes = [Counter(), Counter(success=8, retry_scheduled=2), Counter(dead_lettered=1, deferred=5, lock_busy=3)]
    throughput, failures = sparks(minutes)
    assert throughput.values == (0.0, 8.0, 1.0)
    assert failures.values == (0.0, 0.2, 1.0)  # 2 of 10 attempts retried; the one attempt dead-lettered


@given(st.lists(st.floats(min_value=0, max_value=1e9, allow_nan=False), max_size=60))
def test_a_sparkline_stays_inside_its_box(values: list[float]) -> None:
    spark = Spark(tuple(values))
    for point in spark.points().split():
        x, y = map(float, point.split(","))
        assert 0 <= x <= Spark.WIDTH + 0.05 and 0 <= y <= Spark.HEIGHT


def test_the_throughput_sparkline_shows_the_workers_counts(pipeline: Pipeline, console_client: ConsoleClient) -> None:
    stats = JobStats(pipeline.clients.redis, pipeline.clients.keys)
    stats.record(Outcome.SUCCESS, count=7)
    stats.record(Outcome.RETRY_SCHEDULED, count=3)
    stats.close()
    page = _page(console_client("viewer"))
    assert page.text("throughput").startswith("Jobs ended per minute 7 this minute")
    assert page.text("failure-rate").startswith("Failed attempts 30 % this minute")


def test_the_done_message_is_never_text_from_the_url(console_client: ConsoleClient) -> None:
    page = _page(console_client("viewer"), "/overview?done=<b>hacked</b>")
    assert "done" not in page.ids and "hacked" not in page.text("main")
