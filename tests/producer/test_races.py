"""Concurrent submits in one process, at the Python door and the intake actor's: never an error, changes of one
event in turn, and every request under one request key answered with the first receipt, exactly."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

import calsync
from calsync.core.model.intake import IntakeMessage
from calsync.core.producer.intake_job import submit_intake
from calsync.core.producer.receipts import Receipt
from tests.support import Pipeline, change, in_threads

pytestmark = pytest.mark.both_databases

THREADS = 12

# A door: submits a change document for tenant-1 under an optional request key.
Door = Callable[[Pipeline, dict[str, Any], str | None], Receipt]


def _python_api(pipeline: Pipeline, doc: dict[str, Any], key: str | None) -> Receipt:
    return calsync.submit_change("tenant-1", doc, request_key=key, runtime=pipeline.runtime)


def _intake_actor(pipeline: Pipeline, doc: dict[str, Any], key: str | None) -> Receipt:
    message = IntakeMessage.model_validate({"tenant_id": "tenant-1", "change": doc, "request_id": key})
    return submit_intake(pipeline.producer, message, message_id=None)


DOORS = pytest.mark.parametrize("door", [_python_api, _intake_actor], ids=["submit_change", "intake actor"])


def _at_once(pipeline: Pipeline, door: Door, docs: list[dict[str, Any]], key: str | None = None) -> list[Receipt]:
    """Submit every document from its own thread, released together by a barrier; fails on any error."""
    start = threading.Barrier(len(docs))
    receipts: list[Receipt] = []
    errors: list[BaseException] = []

    def send(n: int) -> None:
        start.wait()
        try:
            receipts.append(door(pipeline, docs[n], key))
        except BaseException as exc:
            errors.append(exc)

    in_threads(send, len(docs))
    assert errors == []
    return receipts


@DOORS
def test_parallel_identical_creates_of_one_new_event_make_one_version(pipeline: Pipeline, door: Door) -> None:
    account = pipeline.account()

    receipts = _at_once(pipeline, door, [change([account], entity_id="evt-new", title="Kick-off")] * THREADS)

    assert {(r.entity_id, r.version, len(r.job_ids)) for r in receipts} == {("evt-new", 1, 1)}
    assert pipeline.event_version("evt-new") == 1


@DOORS
def test_parallel_different_creates_of_one_new_event_each_get_the_next_version(pipeline: Pipeline, door: Door) -> None:
    account = pipeline.account()
    docs = [change([account], entity_id="evt-new", title=f"Kick-off {n}") for n in range(THREADS)]

    receipts = _at_once(pipeline, door, docs)

    assert sorted(r.version for r in receipts) == list(range(1, THREADS + 1))
    assert pipeline.event_version("evt-new") == THREADS


@DOORS
def test_parallel_requests_under_one_key_all_get_the_first_receipt(pipeline: Pipeline, door: Door) -> None:
    account = pipeline.account()

    receipts = _at_once(pipeline, door, [change([account], title="Booked")] * THREADS, key="order-7731")

    assert all(r == receipts[0] for r in receipts), receipts
    assert (receipts[0].version, len(receipts[0].job_ids)) == (1, 1)
    assert pipeline.event_version(receipts[0].entity_id) == 1
