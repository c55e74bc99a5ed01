"""Idempotency-Key over HTTP: concurrent identical requests create one version and get one receipt."""

from __future__ import annotations

import threading

import httpx
import pytest

from tests.api.live import LiveApi
from tests.support import Pipeline, change, in_threads

pytestmark = pytest.mark.both_databases


def test_concurrent_identical_requests_create_one_version(api: LiveApi, pipeline: Pipeline) -> None:
    account = pipeline.account()
    pipeline.submit([account], entity_id="evt-twins", title="v1")
    key = api.key()
    doc = change([account], entity_id="evt-twins", title="v2")
    start = threading.Barrier(4)
    answers: list[httpx.Response] = []

    def send() -> None:
        with api.client(key) as http:
            start.wait()
            answers.append(http.post("/v1/changes", json=doc, headers={"Idempotency-Key": "twins-1"}))

    in_threads(lambda _: send(), 4)

    assert [a.status_code for a in answers] == [202] * 4, [a.text for a in answers]
    assert {(a.json()["entity_id"], a.json()["version"]) for a in answers} == {("evt-twins", 2)}
    assert pipeline.event_version("evt-twins") == 2
