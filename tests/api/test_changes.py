"""POST /v1/changes and GET /v1/events/{id} over a live server: 202 once committed, tenant isolation."""

from __future__ import annotations

from tests.api.live import LiveApi
from tests.producer.broker_queue import queued_payloads
from tests.support import Pipeline, change


def test_an_accepted_change_is_committed_and_synced(api: LiveApi, pipeline: Pipeline) -> None:
    account = pipeline.account()
    with api.client(api.key()) as http:
        answer = http.post("/v1/changes", json=change([account], title="Standup"))
        assert answer.status_code == 202, answer.text
        receipt = answer.json()
        assert receipt["version"] == 1 and len(receipt["job_ids"]) == 1 and receipt["deferred_accounts"] == []
        assert pipeline.target(receipt["entity_id"], account).status == "pending"  # committed before the answer
        with pipeline.worker():
            pipeline.wait_target(receipt["entity_id"], account, "synced")
        shown = http.get(f"/v1/events/{receipt['entity_id']}").json()
    assert (shown["version"], shown["status"], shown["title"]) == (1, "confirmed", "Standup")
    assert [(t["account_id"], t["status"], t["synced_version"]) for t in shown["targets"]] == [(account, "synced", 1)]


def test_another_tenants_event_reads_exactly_like_a_missing_one(api: LiveApi, pipeline: Pipeline) -> None:
    account = pipeline.account()
    pipeline.submit([account], entity_id="evt-shared")
    with api.client(api.key("tenant-2", "read")) as other:
        theirs = other.get("/v1/events/evt-shared")
        missing = other.get("/v1/events/evt-nothing")
    assert theirs.status_code == missing.status_code == 404
    assert theirs.headers["content-type"] == missing.headers["content-type"] == "application/problem+json"
    assert theirs.json() == {**missing.json(), "detail": missing.json()["detail"].replace("evt-nothing", "evt-shared")}


def test_another_tenants_account_is_refused_like_a_missing_one(api: LiveApi, pipeline: Pipeline) -> None:
    theirs = pipeline.account(tenant="tenant-2", account_id="acc-theirs")
    with api.client(api.key("tenant-1")) as http:
        foreign = http.post("/v1/changes", json=change([theirs]))
        missing = http.post("/v1/changes", json=change(["acc-nothing"]))
    assert foreign.status_code == missing.status_code == 422
    assert foreign.json() == _replaced(missing.json(), "acc-nothing", "acc-theirs")
    assert foreign.json()["errors"][0]["field"] == "accounts"


def _replaced(doc: object, old: str, new: str) -> object:
    if isinstance(doc, dict):
        return {k: _replaced(v, old, new) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_replaced(v, old, new) for v in doc]
    return doc.replace(old, new) if isinstance(doc, str) else doc


def test_the_trace_id_of_traceparent_reaches_the_jobs_and_the_answer(api: LiveApi, pipeline: Pipeline) -> None:
    account = pipeline.account()
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    with api.client(api.key()) as http:
        answer = http.post("/v1/changes", json=change([account]),
                           headers={"traceparent": f"00-{trace}-00f067aa0ba902b7-01"})  # fmt: skip
        by_request_id = http.get(f"/v1/events/{answer.json()['entity_id']}", headers={"X-Request-Id": "req-42"})
    assert answer.headers["x-request-id"] == trace
    assert by_request_id.headers["x-request-id"] == "req-42"
    settings = pipeline.settings
    assert settings.redis_url is not None
    (payload,) = queued_payloads(settings.redis_url, settings.redis_namespace, settings.queue)
    assert payload["trace_id"] == trace
