"""GET /v1/events/{id} says why a pending target waits: held by what, until when, and the provider's last error."""

from __future__ import annotations

import datetime as dt

from calsync.core.store import targets
from calsync.core.store.targets import TargetKey
from tests.api.live import LiveApi
from tests.support import Pipeline, utcnow


def test_the_event_view_says_why_a_target_waits_until_when_and_the_providers_error(
    api: LiveApi, pipeline: Pipeline
) -> None:
    held, queued = pipeline.account(account_id="acc-a"), pipeline.account(account_id="acc-b")
    receipt = pipeline.submit([held, queued])  # no worker runs: both stay pending
    due = utcnow() + dt.timedelta(seconds=15)
    with pipeline.clients.db.write() as conn:  # what a worker notes when a breaker holds the job after a 503
        targets.record_retry(conn, TargetKey("tenant-1", receipt.entity_id, held), version=1, due_at=due,
                             wait_reason="circuit open", error_class="ProviderUnavailable",
                             message="503: backend down")  # fmt: skip
    with api.client(api.key(scope="read")) as http:
        answer = http.get(f"/v1/events/{receipt.entity_id}")
    assert answer.status_code == 200, answer.text
    shown = {t["account_id"]: t for t in answer.json()["targets"]}
    assert (shown[held]["status"], shown[held]["wait_reason"], shown[held]["error_class"]) == (
        "pending", "circuit open", "ProviderUnavailable")  # fmt: skip
    assert shown[held]["last_error"] == "503: backend down"
    assert dt.datetime.fromisoformat(shown[held]["due_at"]) == due
    assert (shown[queued]["status"], shown[queued]["wait_reason"]) == ("pending", None)  # queued: waits for nothing
