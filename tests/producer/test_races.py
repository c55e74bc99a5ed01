"""Concurrent submits in one process, at the Python door and the intake actor's: never an error, changes of one
event in turn, and every request under one request key answered with the first receipt, exactly."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest

import calsync
from calsync.core.model.intake import IntakeMessage
from calsync.core.producer.dedup import Claim, Claimed
from calsync.core.producer.receipts import Receipt
from calsync.core.producer.submit import Intake, submit_intake
from calsync.core.store import events
from tests.producer.fakes import MemoryMarkers, MemoryQueue
from tests.support import Pipeline, change, in_threads, wait_until

pytestmark = pytest.mark.both_databases

THREADS = 12

# A door: submits a change document for tenant-1 under an optional request key.
Door = Callable[[Pipeline, dict[str, Any], str | None], Receipt]


def _python_api(pipeline: Pipeline, doc: dict[str, Any], key: str | None) -> Receipt:
    return calsync.submit_change("tenant-1", doc, request_key=key, clients=pipeline.clients)


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
def test_parallel_identical_edits_that_add_an_account_make_one_version(pipeline: Pipeline, door: Door) -> None:
    first, added = pipeline.account(account_id="acc-a"), pipeline.account(account_id="acc-b")
    pipeline.submit([first], entity_id="evt-1", title="Review")

    receipts = _at_once(pipeline, door, [change([first, added], entity_id="evt-1", title="Review")] * THREADS)

    assert {(r.version, len(r.job_ids)) for r in receipts} == {(2, 2)}
    assert pipeline.event_version("evt-1") == 2
    assert pipeline.target("evt-1", added).wanted_version == 2


@DOORS
def test_parallel_requests_under_one_key_all_get_the_first_receipt(pipeline: Pipeline, door: Door) -> None:
    account = pipeline.account()

    receipts = _at_once(pipeline, door, [change([account], title="Booked")] * THREADS, key="order-7731")

    assert all(r == receipts[0] for r in receipts), receipts
    assert (receipts[0].version, len(receipts[0].job_ids)) == (1, 1)
    assert pipeline.event_version(receipts[0].entity_id) == 1


def _committed(pipeline: Pipeline, entity_id: str) -> bool:
    with pipeline.clients.db.read() as conn:
        return events.get_event(conn, "tenant-1", entity_id) is not None


class _SecondClaimsFirst(MemoryMarkers):
    """Markers whose first claim waits until a second one is made: an identical change comes between the first
    submission's commit and its claim."""

    def __init__(self) -> None:
        super().__init__()
        self.second_claimed = threading.Event()
        self._calls = 0

    def claim_all(self, claims: Sequence[Claim]) -> list[Claimed]:
        self._calls += 1
        if self._calls == 1:
            wait_until(self.second_claimed.is_set, what="the identical change to claim its markers")
            return super().claim_all(claims)
        answers = super().claim_all(claims)
        self.second_claimed.set()
        return answers


def test_an_identical_change_claiming_before_the_first_shares_its_one_job(pipeline: Pipeline) -> None:
    account = pipeline.account()
    queue = MemoryQueue()
    intake = Intake(pipeline.clients.db, _SecondClaimsFirst(), queue, default_send_updates="none")
    doc = change([account], entity_id="evt-new")
    receipts: list[Receipt] = []
    first = threading.Thread(target=lambda: receipts.append(intake.submit("tenant-1", doc)))
    first.start()
    wait_until(lambda: _committed(pipeline, "evt-new"), what="the first submission's commit")

    second = intake.submit("tenant-1", doc)  # labels its job update where the first labelled it create
    first.join()

    assert [p.operation for p in queue.payloads] == ["update"]  # one job: the first submission's is suppressed
    assert receipts == [second] and second.job_ids == [queue.payloads[0].job_id]
