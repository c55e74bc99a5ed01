"""The dead letters page as an operator uses it: filters and the error's text narrow the list, one record is read
whole (its payload and a quarantined body shown as text, never as markup), one is replayed or discarded, every action
is audited, and a viewer sees no button and is refused if it posts anyway."""

from __future__ import annotations

import json
import re
import time

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from markupsafe import escape

from calsync.core.observability.pipeline_state import StateReader
from calsync.core.store import targets
from calsync.core.store.targets import TargetKey
from tests.console.conftest import ConsoleClient, form_token
from tests.console.dead_letter_records import dead_letter_audit, element, listed, record, signed_in_as, store, stored
from tests.support import Pipeline

HOSTILE = '<script>alert("dlq")</script>'


def test_filters_and_the_errors_text_narrow_the_list(pipeline: Pipeline, console_client: ConsoleClient) -> None:
    memory = pipeline.account(tenant="tenant-1", account_id="acc-mem")
    timeouts = store(pipeline, *(record(account=memory, entity=f"evt-{i}", last_error=f"Read TIMEOUT after {i} s")
                                 for i in range(55)))  # fmt: skip
    other = store(pipeline, record(tenant="tenant-2", account="acc-gone", error_class="Conflict", last_error="409"))
    quota = store(pipeline, record(last_error="quota 100% used"), record(last_error="quota 1000 used"),
                  record(last_error="a_b"), record(last_error="axb"))  # fmt: skip
    quarantined = store(pipeline, record(kind="quarantined", job_type="unknown", last_error="not JSON"))
    http = console_client("viewer")
    everything = timeouts + other + quota + quarantined
    assert listed(http) == sorted(everything, reverse=True)  # two pages, newest first
    assert listed(http, q="timeout") == sorted(timeouts, reverse=True)  # ignoring case
    assert listed(http, q="100%") == [quota[0]] and listed(http, q="a_b") == [quota[2]]  # no wildcards
    assert listed(http, tenant_id="tenant-2") == other == listed(http, error_class="Conflict")
    assert listed(http, provider="memory") == sorted(timeouts, reverse=True)
    assert listed(http, kind="quarantined") == quarantined
    assert listed(http, account_id=memory, q="after 7 s") == [timeouts[7]]
    assert listed(http, status="discarded") == [] and len(listed(http, status="all")) == len(everything)
    refused = http.get("/dead-letters", params={"kind": "parcel"})
    assert refused.status_code == 400 and "kind must be one of" in refused.text


@pytest.fixture
def hostile(pipeline: Pipeline) -> list[int]:
    """A record whose error is markup."""
    return store(pipeline, record(last_error=HOSTILE))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(field="q", value='"><script>alert(1)</script>')
@example(field="tenant_id", value="<b>t</b>")
@example(field="before", value="\N{SUPERSCRIPT TWO}")  # a digit to str.isdigit, not to int
@example(field="before", value="9" * 5000)  # more digits than int() converts
@given(
    field=st.sampled_from(["q", "tenant_id", "account_id", "error_class", "kind", "status", "provider", "before"]),
    value=st.text(st.characters(codec="utf-8"), max_size=300),
)
def test_any_filter_value_is_answered_and_shown_escaped(
    hostile: list[int], console_client: ConsoleClient, field: str, value: str
) -> None:
    http = console_client("operator")
    answer = http.get("/dead-letters", params={"status": "all", field: value})
    assert answer.status_code in (200, 400), answer.text
    assert "<script>" not in answer.text
    shown = re.search(rf'name="{field}" value="([^"]*)"', answer.text)
    if answer.status_code == 200 and shown is not None:  # a text field shows the value back, escaped
        assert shown.group(1) == str(escape(value.strip()))
    bulk = {"action": "discard", "changed_from": value, field: value}
    confirm = http.get("/dead-letters/bulk", params=bulk)
    assert confirm.status_code in (200, 400), confirm.text
    assert "<script>" not in confirm.text
    form = {"csrf_token": form_token(answer.text), "seen": value, "action": "discard", field: value}
    posted = http.post("/dead-letters/bulk", data=form)
    assert posted.status_code in (303, 400), posted.text


def test_a_record_is_read_whole_and_its_bodies_as_text(pipeline: Pipeline, console_client: ConsoleClient) -> None:
    body = b'{"actor_name": "x"}<img src=x onerror=alert(1)>\xff'
    earlier, *_ = store(pipeline, record(entity="evt-q", account="acc-q", last_error="first failure"))
    [quarantined] = store(pipeline, record(entity="evt-q", account="acc-q", kind="quarantined", last_error=HOSTILE,
                                           raw_body=body, raw_size=len(body), payload={"note": HOSTILE}))  # fmt: skip
    page = console_client("viewer").get(f"/dead-letters/{quarantined}")
    assert page.status_code == 200
    assert "<img" not in page.text and "<script>" not in page.text
    assert json.loads(element(page.text, "payload")) == {"note": HOSTILE}
    assert element(page.text, "raw-body") == body.decode("utf-8", "backslashreplace")
    history = page.text[page.text.index('id="error-history"') :]
    assert f">{earlier}</a>" in history and "first failure" in history
    for missing in ("999999", "0", "2147483648", "abc", "%C2%B2"):
        answer = console_client("viewer").get(f"/dead-letters/{missing}")
        assert answer.status_code == 404 and 'id="error"' in answer.text, missing


def _failed_target(pipeline: Pipeline) -> tuple[TargetKey, int]:
    account = pipeline.account(account_id="acc-replay")
    receipt = pipeline.submit([account], entity_id="evt-replay")
    key = TargetKey("tenant-1", receipt.entity_id, account)
    with pipeline.clients.db.write() as conn:
        targets.record_failed(conn, key, version=1, error_class="Forbidden", message="refused")
    [record_id] = store(pipeline, record(entity=key.event_id, account=account))
    return key, record_id


def _ready(pipeline: Pipeline) -> int:
    return sum(q.ready for q in StateReader(pipeline.clients).queues(time.time()))


def test_replaying_one_enqueues_its_job_and_is_audited(pipeline: Pipeline, console_client: ConsoleClient) -> None:
    key, record_id = _failed_target(pipeline)
    http = console_client("operator")
    listing = http.get("/dead-letters", params={"tenant_id": "tenant-1"})
    assert 'class="replay' in listing.text
    ready = _ready(pipeline)
    answer = http.post(f"/dead-letters/{record_id}/replay?tenant_id=tenant-1",
                       data={"csrf_token": form_token(listing.text)})  # fmt: skip
    assert answer.status_code == 303 and "tenant_id=tenant-1" in answer.headers["location"]
    shown = http.get(answer.headers["location"])
    assert f"Dead letter {record_id} replayed." in element(shown.text, "done")
    replayed = stored(pipeline, record_id)
    target = pipeline.target(key.event_id, key.account_id)
    assert replayed.status == "replayed" and target.status == "pending" and target.job_id == replayed.replay_job_id
    assert _ready(pipeline) == ready + 1
    again = http.post(f"/dead-letters/{record_id}/replay?from=record", data={"csrf_token": form_token(shown.text)})
    assert "left: record is replayed" in element(http.get(again.headers["location"]).text, "done")
    rows, actor = dead_letter_audit(pipeline), signed_in_as(shown.text)
    assert [(r.actor, r.action, r.subject, r.count) for r in rows] == [
        (actor, "dead_letters.replay", f"dead letter {record_id}", 0),
        (actor, "dead_letters.replay", f"dead letter {record_id}", 1),
    ]
    assert rows[0].detail == {"skipped": "record is replayed"}


def test_discarding_one_from_its_page(pipeline: Pipeline, console_client: ConsoleClient) -> None:
    [record_id, kept] = store(pipeline, record(entity="evt-a"), record(entity="evt-b"))
    http = console_client("operator")
    page = http.get(f"/dead-letters/{record_id}")
    assert 'class="discard' in page.text
    answer = http.post(f"/dead-letters/{record_id}/discard?from=record", data={"csrf_token": form_token(page.text)})
    assert f"/dead-letters/{record_id}?done=" in answer.headers["location"]
    shown = http.get(answer.headers["location"])
    assert f"Dead letter {record_id} discarded." in element(shown.text, "done") and 'class="discard' not in shown.text
    discarded = stored(pipeline, record_id)
    actor = signed_in_as(shown.text)
    assert discarded.status == "discarded" and discarded.note == f"discarded from the console by {actor}"
    assert stored(pipeline, kept).status == "open"
    [row] = dead_letter_audit(pipeline)
    assert (row.actor, row.action, row.subject, row.count) == (
        actor,
        "dead_letters.discard",
        f"dead letter {record_id}",
        1,
    )


def test_a_viewer_sees_no_action_and_cannot_act(pipeline: Pipeline, console_client: ConsoleClient) -> None:
    [record_id] = store(pipeline, record())
    viewer = console_client("viewer")
    listing = viewer.get("/dead-letters")
    one = viewer.get(f"/dead-letters/{record_id}")
    confirm = viewer.get("/dead-letters/bulk", params={"action": "replay"})
    for page in (listing, one, confirm):
        assert page.status_code == 200
        for marker in ('class="replay', 'class="discard', 'id="replay-all"', 'id="discard-all"', 'name="seen"'):
            assert marker not in page.text
    token = {"csrf_token": form_token(listing.text)}
    refused = [viewer.post(f"/dead-letters/{record_id}/{action}", data=token) for action in ("replay", "discard")]
    refused.append(viewer.post("/dead-letters/bulk", data={**token, "action": "replay", "seen": "1"}))
    assert [r.status_code for r in refused] == [403, 403, 403]
    assert stored(pipeline, record_id).status == "open"
    assert dead_letter_audit(pipeline) == []
