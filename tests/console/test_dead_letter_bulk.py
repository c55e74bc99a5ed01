"""Bulk actions on dead letters from the console: the confirmation states the count matched now, a count that
changed before the form came back is caught, the action runs in batches and reports its progress, acts on exactly
the records confirmed, and an action whose process stopped is resumed from where it stopped."""

from __future__ import annotations

import re

import httpx
import pytest
from fastapi import FastAPI

from calsync.core.console.bulk import BulkActions
from calsync.core.console.services import ConsoleServices
from tests.console.conftest import ConsoleClient, console_of, form_token
from tests.console.dead_letter_records import dead_letter_audit, element, record, signed_in_as, store, stored
from tests.support import Pipeline, wait_until

pytestmark = pytest.mark.slow

_HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)">')


def _confirmation(http: httpx.Client, action: str, **criteria: str) -> tuple[str, dict[str, str]]:
    """The confirmation page, and what its form sends back (as a browser submits it)."""
    page = http.get("/dead-letters/bulk", params={"action": action, **criteria})
    assert page.status_code == 200
    confirm = page.text[page.text.index('id="confirm"') :]
    return page.text, dict(_HIDDEN.findall(confirm))


def _finished(http: httpx.Client, progress: str) -> str:
    def done() -> str | None:
        page = http.get(progress).text
        return page if '<h2 id="progress-heading">Finished' in page else None

    page = wait_until(done, timeout=120, what="the bulk action to finish")
    assert page is not None
    return page


def test_a_filtered_set_is_replayed_in_batches_and_exactly_it(
    pipeline: Pipeline, console_client: ConsoleClient
) -> None:
    matching = store(pipeline, *(record(entity=f"evt-{i}", last_error=f"upstream timeout #{i}") for i in range(1200)))
    others = store(pipeline, *(record(entity=f"other-{i}", last_error="forbidden") for i in range(30)))
    foreign = store(pipeline, record(tenant="tenant-2", entity="evt-x", last_error="upstream timeout"))
    http = console_client("operator")
    listing = http.get("/dead-letters", params={"tenant_id": "tenant-1", "q": "timeout"})
    assert 'id="replay-all"' in listing.text
    page, form = _confirmation(http, "replay", tenant_id="tenant-1", q="timeout")
    assert (
        element(page, "confirm-count") == "1200"
        and element(page, "confirm-filter") == 'tenant_id="tenant-1" q="timeout"'
    )
    assert form["seen"] == "1200" and form["q"] == "timeout"
    started = http.post("/dead-letters/bulk", data=form)
    assert started.status_code == 303 and "/dead-letters/bulk/" in started.headers["location"]
    [late] = store(pipeline, record(entity="evt-late", last_error="upstream timeout, after the confirmation"))
    page = _finished(http, started.headers["location"])
    assert element(page, "progress-count") == "1200 of 1200" and element(page, "progress-changed") == "1200"
    assert {stored(pipeline, i).status for i in matching} == {"replayed"}
    assert {stored(pipeline, i).status for i in (*others, *foreign, late)} == {"open"}
    rows = dead_letter_audit(pipeline)
    assert {r.actor for r in rows} == {signed_in_as(page)}
    assert [(r.action, r.count, r.subject) for r in reversed(rows)] == [
        ("dead_letters.replay", n, 'filter: tenant_id="tenant-1" q="timeout"') for n in (500, 500, 200)
    ]
    assert [r.detail["ids"] for r in reversed(rows)] == [  # type: ignore[index]
        [matching[0], matching[499]],
        [matching[500], matching[999]],
        [matching[1000], matching[-1]],
    ]


def test_a_count_changed_before_the_confirmation_came_back_is_caught(
    pipeline: Pipeline, console_client: ConsoleClient
) -> None:
    first = store(pipeline, record(entity="evt-1", error_class="Gone"), record(entity="evt-2", error_class="Gone"))
    http = console_client("operator")
    _page, form = _confirmation(http, "discard", error_class="Gone")
    assert form["seen"] == "2"
    store(pipeline, record(entity="evt-3", error_class="Gone"))
    again = http.post("/dead-letters/bulk", data=form)
    assert again.status_code == 303 and "changed_from=2" in again.headers["location"]
    page = http.get(again.headers["location"]).text
    assert "changed from 2 to 3" in element(page, "count-changed") and element(page, "confirm-count") == "3"
    assert {stored(pipeline, i).status for i in first} == {"open"}
    assert dead_letter_audit(pipeline) == []
    _page, form = _confirmation(http, "discard", error_class="Gone")
    page = _finished(http, http.post("/dead-letters/bulk", data=form).headers["location"])
    assert element(page, "progress-changed") == "3"
    [row] = dead_letter_audit(pipeline)
    assert (row.action, row.count) == ("dead_letters.discard", 3)


def test_records_that_cannot_be_replayed_are_reported_with_why(
    pipeline: Pipeline, console_client: ConsoleClient
) -> None:
    store(pipeline, record(entity="evt-ok"), record(entity="evt-bad", job_type="mystery"))
    http = console_client("operator")
    _page, form = _confirmation(http, "replay")
    page = _finished(http, http.post("/dead-letters/bulk", data=form).headers["location"])
    assert element(page, "progress-changed") == "1" and element(page, "progress-skipped") == "1"
    assert "unknown job type &#39;mystery&#39;: discard it" in page


@pytest.fixture
def stopped(pipeline: Pipeline, served_app: FastAPI) -> tuple[list[int], str]:
    """Three open records, and a bulk discard of them as a serve process that ended after its first batch (of 2)
    leaves it: the state of that batch, no lease."""
    ids = store(pipeline, *(record(entity=f"evt-{i}") for i in range(3)))
    services: ConsoleServices = console_of(served_app).state.console
    ended = BulkActions(pipeline.clients.redis, pipeline.clients.keys, services.api, batch=2)
    bulk = ended.create("discard", "operator@example.test", {}, total=len(ids), up_to_id=ids[-1])
    assert ended.step(bulk)
    return ids, bulk.id


def test_a_stopped_action_is_resumed_from_where_it_stopped(
    pipeline: Pipeline, console_client: ConsoleClient, stopped: tuple[list[int], str]
) -> None:
    ids, bulk_id = stopped
    http = console_client("operator")
    page = http.get(f"/dead-letters/bulk/{bulk_id}").text
    assert element(page, "progress-heading") == "Stopped" and element(page, "progress-count") == "2 of 3"
    assert '<meta http-equiv="refresh"' not in page and 'id="resume-bulk"' in page
    resumed = http.post(f"/dead-letters/bulk/{bulk_id}/resume", data={"csrf_token": form_token(page)})
    page = _finished(http, resumed.headers["location"])
    assert element(page, "progress-count") == "3 of 3"
    assert {stored(pipeline, i).status for i in ids} == {"discarded"}
    assert [row.count for row in reversed(dead_letter_audit(pipeline))] == [2, 1]


def test_a_viewer_sees_progress_but_cannot_resume(
    pipeline: Pipeline, console_client: ConsoleClient, stopped: tuple[list[int], str]
) -> None:
    ids, bulk_id = stopped
    viewer = console_client("viewer")
    page = viewer.get(f"/dead-letters/bulk/{bulk_id}").text
    assert element(page, "progress-count") == "2 of 3" and 'id="resume-bulk"' not in page
    refused = viewer.post(f"/dead-letters/bulk/{bulk_id}/resume", data={"csrf_token": form_token(page)})
    assert refused.status_code == 403 and stored(pipeline, ids[-1]).status == "open"
    assert viewer.get("/dead-letters/bulk/0123456789abcdef").status_code == 404
