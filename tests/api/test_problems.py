"""Every error status of the API, each an RFC 9457 problem document naming what to fix."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import httpx
import pytest

from calsync.core.api.services import services_from_clients
from calsync.core.clients import connect
from calsync.core.store import api_keys, events
from calsync.core.store.database import Database
from tests.api.live import LiveApi, serving
from tests.support import Pipeline, change

UNREACHABLE_DATABASE = "postgresql+psycopg://postgres@127.0.0.1:1/test?connect_timeout=2"


def _problem(answer: httpx.Response, status: int) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    doc: dict[str, Any] = answer.json()
    assert doc["status"] == status and doc["type"].startswith("urn:calsync:problem:") and doc["title"]
    return doc


def test_malformed_json_is_400(api: LiveApi) -> None:
    with api.client(api.key()) as http:
        answer = http.post(
            "/v1/changes", content=b'{"operation": "upsert",', headers={"Content-Type": "application/json"}
        )
    assert "not valid JSON" in _problem(answer, 400)["detail"]


def test_every_bad_field_is_named_in_one_422(api: LiveApi, pipeline: Pipeline) -> None:
    account = pipeline.account()
    doc = change([account], title="")
    doc["event"]["attendees"] = ["not-an-email"]
    doc["send_updates"] = "sometimes"
    doc["colour"] = "red"
    with api.client(api.key()) as http:
        answer = http.post("/v1/changes", json=doc)
    messages = {error["field"]: error["message"] for error in _problem(answer, 422)["errors"]}
    assert messages == {
        "event.title": "must not be empty",
        "event.attendees.0": "must be an email address",
        "send_updates": "must be 'all', 'external_only' or 'none'",
        "colour": "is not a known field",
    }
    assert pipeline.dead_letters() == []


def test_a_missing_or_wrong_key_is_401_with_a_bearer_challenge(api: LiveApi) -> None:
    with api.client() as anonymous, api.client("csk_wrong") as wrong:
        for answer in (anonymous.get("/v1/events/evt-1"), wrong.get("/v1/events/evt-1"),
                       anonymous.post("/v1/changes", json={})):  # fmt: skip
            _problem(answer, 401)
            assert answer.headers["www-authenticate"].startswith("Bearer")


def test_a_revoked_key_is_401_at_once(api: LiveApi) -> None:
    key = api.key(scope="read")
    with api.client(key) as http:
        assert _problem(http.get("/v1/events/evt-1"), 404)
        with api.db.write() as conn:
            (record,) = [k for k in api_keys.list_keys(conn, "tenant-1")]
            api_keys.revoke(conn, record.id)
        assert 'error="invalid_token"' in http.get("/v1/events/evt-1").headers["www-authenticate"]


def test_keys_that_authenticated_are_cached_for_a_few_seconds(pipeline: Pipeline) -> None:
    """With the default cache a revoked key still passes until its entry expires (CALSYNC_API_KEY_CACHE_SECONDS)."""
    with serving(replace(services_from_clients(pipeline.clients), key_cache_seconds=600)) as api:
        key = api.key(scope="read")
        with api.client(key) as http:
            assert http.get("/v1/events/evt-1").status_code == 404
            with api.db.write() as conn:
                (record,) = api_keys.list_keys(conn, "tenant-1")
                api_keys.revoke(conn, record.id)
            assert http.get("/v1/events/evt-1").status_code == 404  # from the cache, no database read
        with api.client("csk_never-issued") as stranger:
            assert stranger.get("/v1/events/evt-1").status_code == 401  # failures are never cached


def test_a_key_without_the_scope_is_403(api: LiveApi, pipeline: Pipeline) -> None:
    account = pipeline.account()
    with api.client(api.key(scope="read")) as reader, api.client(api.key(scope="submit")) as submitter:
        _problem(reader.post("/v1/changes", json=change([account])), 403)
        _problem(submitter.get("/v1/dead-letters"), 403)
        answer = submitter.post("/v1/dead-letters/replay", json={"ids": [1]})
    assert "'admin'" in _problem(answer, 403)["detail"]
    assert 'error="insufficient_scope"' in answer.headers["www-authenticate"]


def test_a_body_over_the_limit_is_413_and_saves_nothing(pipeline: Pipeline) -> None:
    services = services_from_clients(pipeline.clients)
    limited = replace(services, max_body_bytes=2048)
    account = pipeline.account()
    with serving(limited) as api, api.client(api.key()) as http:
        big = change([account], entity_id="evt-big", description="x" * 4000)
        _problem(http.post("/v1/changes", json=big), 413)
        chunked = http.post("/v1/changes", content=iter([json.dumps(big).encode()]),
                            headers={"Content-Type": "application/json"})  # fmt: skip
        _problem(chunked, 413)
        assert http.post("/v1/changes", json=change([account], entity_id="evt-small")).status_code == 202
    with pipeline.clients.db.read() as conn:
        assert events.get_event(conn, "tenant-1", "evt-big") is None


@pytest.fixture
def database_down(pipeline: Pipeline) -> Iterator[LiveApi]:
    services = services_from_clients(pipeline.clients)
    down = Database(UNREACHABLE_DATABASE)
    with serving(replace(services, db=down)) as api:
        yield api
    down.dispose()


def test_an_unreachable_database_is_503_with_retry_after(database_down: LiveApi, pipeline: Pipeline) -> None:
    with database_down.client("csk_any") as http:
        for answer in (http.post("/v1/changes", json=change(["acc-1"])), http.get("/v1/events/evt-1"),
                       http.get("/readyz")):  # fmt: skip
            _problem(answer, 503)
            assert int(answer.headers["retry-after"]) >= 1
        assert http.get("/healthz").json() == {"status": "ok", "checks": {}}


def test_an_enqueue_failing_after_the_commit_is_202_with_deferred_accounts(pipeline: Pipeline) -> None:
    broken = connect(pipeline.settings.model_copy(update={"broker_url": "redis://127.0.0.1:1/0"}))
    account = pipeline.account()
    try:
        with serving(services_from_clients(broken)) as api, api.client(api.key()) as http:
            answer = http.post("/v1/changes", json=change([account]))
            _problem(http.get("/readyz"), 503)
    finally:
        broken.close()
    assert answer.status_code == 202, answer.text
    receipt = answer.json()
    assert (receipt["job_ids"], receipt["deferred_accounts"]) == ([], [account])
    assert pipeline.target(receipt["entity_id"], account).status == "pending"  # the reconciler will enqueue it


def test_the_same_idempotency_key_with_another_body_is_422(api: LiveApi, pipeline: Pipeline) -> None:
    account = pipeline.account()
    with api.client(api.key()) as http:
        first = http.post("/v1/changes", json=change([account], title="A"), headers={"Idempotency-Key": "k-1"})
        again = http.post("/v1/changes", json=change([account], title="A"), headers={"Idempotency-Key": "k-1"})
        other = http.post("/v1/changes", json=change([account], title="B"), headers={"Idempotency-Key": "k-1"})
    assert first.status_code == again.status_code == 202 and again.json() == first.json()
    assert _problem(other, 422)["errors"][0]["field"] == "header.Idempotency-Key"
    assert pipeline.event_version(first.json()["entity_id"]) == 1


def test_unknown_paths_and_methods_are_problems_too(api: LiveApi) -> None:
    with api.client(api.key()) as http:
        _problem(http.get("/v1/nothing"), 404)
        _problem(http.delete("/v1/changes"), 405)


def test_keys_never_reach_the_log_and_lines_carry_the_trace(api: LiveApi, caplog: pytest.LogCaptureFixture) -> None:
    key = api.key()
    with caplog.at_level("INFO"), api.client(key) as http:
        http.get("/v1/events/evt-1", headers={"X-Request-Id": "req-log"})
        http.get("/v1/events/evt-1", headers={"Authorization": "Bearer csk_a-wrong-key"})
    lines = [r for r in caplog.records if r.name == "calsync.api.access"]
    assert any(getattr(r, "fields", {}).get("trace_id") == "req-log" and r.fields["status"] == 404 for r in lines)
    assert all(r.fields["route"] == "/v1/events/{entity_id}" for r in lines)
    text = caplog.text + "".join(str(getattr(r, "fields", "")) for r in caplog.records)
    assert key not in text and "csk_a-wrong-key" not in text


def test_request_metrics_by_route_template_and_status(api: LiveApi) -> None:
    with api.client(api.key()) as http:
        http.get("/v1/events/evt-metrics")
        exposed = http.get("/metrics").text
    assert 'calsync_http_requests_total{method="GET",route="/v1/events/{entity_id}",status="404"}' in exposed
    assert (
        'calsync_http_request_duration_seconds_bucket{le="0.005",method="GET",route="/v1/events/{entity_id}"}'
        in exposed
    )
    assert "evt-metrics" not in exposed


@pytest.mark.postgresql_only
def test_a_value_the_database_cannot_store_is_422_not_500(api: LiveApi, pipeline: Pipeline) -> None:
    account = pipeline.account()
    with api.client(api.key(scope="admin")) as http:
        answer = http.post("/v1/changes", json=change([account], title="a\u0000b"))
        listed = http.get("/v1/dead-letters", params={"reason": "a\u0000"})
    assert "NUL" in _problem(answer, 422)["errors"][0]["message"]  # refused as content, before the database
    _problem(listed, 422)
