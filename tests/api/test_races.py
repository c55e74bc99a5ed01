"""Concurrent requests over a live server never answer 5xx: parallel creates of one new event, parallel
identical requests, parallel replays of one Idempotency-Key (each gets the first receipt, exactly)."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest

from tests.api.live import LiveApi
from tests.producer.broker_queue import queued_payloads
from tests.support import Pipeline, change, in_threads

pytestmark = pytest.mark.both_databases

THREADS = 12


def _post_at_once(
    api: LiveApi, docs: list[dict[str, Any]], headers: dict[str, str] | None = None
) -> list[httpx.Response]:
    """POST every document from its own thread and connection, released together by a barrier."""
    key = api.key()
    start = threading.Barrier(len(docs))
    answers: list[httpx.Response] = []

    def send(n: int) -> None:
        with api.client(key) as http:
            http.get("/healthz")  # connected before the barrier, so the POSTs arrive together
            start.wait()
            answers.append(http.post("/v1/changes", json=docs[n], headers=headers))

    in_threads(send, len(docs))
    assert [a.status_code for a in answers] == [202] * len(docs), [a.text for a in answers if a.status_code != 202]
    return answers


def test_parallel_identical_creates_of_one_new_event_make_one_version_and_one_job(
    api: LiveApi, pipeline: Pipeline
) -> None:
    account = pipeline.account()
    doc = change([account], entity_id="evt-new", title="Kick-off")

    answers = _post_at_once(api, [doc] * THREADS)

    assert {(a.json()["entity_id"], a.json()["version"]) for a in answers} == {("evt-new", 1)}
    assert len({tuple(a.json()["job_ids"]) for a in answers}) == 1  # the first job, in every receipt
    assert pipeline.event_version("evt-new") == 1
    settings = pipeline.settings
    assert settings.redis_url is not None
    assert len(queued_payloads(settings.redis_url, settings.redis_namespace, settings.queue)) == 1


def test_parallel_different_creates_of_one_new_event_each_get_their_own_version(
    api: LiveApi, pipeline: Pipeline
) -> None:
    account = pipeline.account()
    docs = [change([account], entity_id="evt-new", title=f"Kick-off {n}") for n in range(THREADS)]

    answers = _post_at_once(api, docs)

    assert sorted(a.json()["version"] for a in answers) == list(range(1, THREADS + 1))
    assert pipeline.event_version("evt-new") == THREADS


def test_parallel_identical_edits_that_add_an_account_make_one_version(api: LiveApi, pipeline: Pipeline) -> None:
    first, added = pipeline.account(account_id="acc-a"), pipeline.account(account_id="acc-b")
    pipeline.submit([first], entity_id="evt-1", title="Review")
    doc = change([first, added], entity_id="evt-1", title="Review")

    answers = _post_at_once(api, [doc] * THREADS)

    assert {(a.json()["version"], tuple(a.json()["job_ids"])) for a in answers} == {
        (2, tuple(answers[0].json()["job_ids"]))
    }
    assert pipeline.event_version("evt-1") == 2
    assert pipeline.target("evt-1", added).wanted_version == 2


def test_parallel_replays_of_one_idempotency_key_all_get_the_first_receipt(api: LiveApi, pipeline: Pipeline) -> None:
    account = pipeline.account()
    doc = change([account], title="Booked")  # no entity_id: each request would otherwise create an event

    answers = _post_at_once(api, [doc] * THREADS, headers={"Idempotency-Key": "order-7731"})

    receipts = [a.json() for a in answers]
    assert all(r == receipts[0] for r in receipts), receipts
    assert receipts[0]["version"] == 1 and len(receipts[0]["job_ids"]) == 1
    assert pipeline.event_version(receipts[0]["entity_id"]) == 1
