"""Request keys (HTTP Idempotency-Key, intake request id): a retried request returns the first receipt and
changes nothing; a different change under the same key is refused; concurrent twins create one version and
get the first receipt, waiting for it while the first request enqueues; a receipt never stored is completed once."""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import pytest
from sqlalchemy import update

from calsync.core.model.errors import IdempotencyKeyReused
from calsync.core.model.payload import JobPayload
from calsync.core.model.vocabulary import Lane
from calsync.core.producer.receipts import OWNER_GRACE, Receipt, store_receipt
from calsync.core.producer.submit import Intake
from calsync.core.store import events, intake_requests
from calsync.core.store.schema import intake_requests as intake_requests_table
from tests.producer.fakes import MemoryMarkers, MemoryQueue
from tests.support import Pipeline, change, in_threads, wait_until

pytestmark = pytest.mark.both_databases


def _version(pipeline: Pipeline, entity_id: str) -> int:
    with pipeline.clients.db.read() as conn:
        event = events.get_event(conn, "tenant-1", entity_id)
    assert event is not None
    return event.version


def test_a_retried_request_returns_the_first_receipt_and_creates_no_version(pipeline: Pipeline) -> None:
    account = pipeline.account()
    first = pipeline.producer.submit("tenant-1", change([account], title="A"), request_key="req-1")
    edited = pipeline.producer.submit(
        "tenant-1", change([account], entity_id=first.entity_id, title="B"), request_key="req-2"
    )
    assert edited.version == 2

    again = pipeline.producer.submit("tenant-1", change([account], title="A"), request_key="req-1")

    assert again == first  # same entity, version and job ids, although the event moved on since
    assert _version(pipeline, first.entity_id) == 2


def test_another_change_under_a_used_key_is_refused_and_saves_nothing(pipeline: Pipeline) -> None:
    account = pipeline.account()
    first = pipeline.producer.submit("tenant-1", change([account], entity_id="evt-1", title="A"), request_key="k")

    with pytest.raises(IdempotencyKeyReused, match="'k' was already used for a different change"):
        pipeline.producer.submit("tenant-1", change([account], entity_id="evt-1", title="B"), request_key="k")

    assert _version(pipeline, first.entity_id) == 1


def test_an_expired_key_is_free_again(pipeline: Pipeline) -> None:
    account = pipeline.account()
    first = pipeline.producer.submit("tenant-1", change([account], entity_id="evt-x", title="A"), request_key="k")
    with pipeline.clients.db.write() as conn:  # the key's lifetime (request_key_ttl) has passed
        conn.execute(update(intake_requests_table).values(expires_at=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)))

    second = pipeline.producer.submit("tenant-1", change([account], entity_id="evt-x", title="B"), request_key="k")

    assert (first.version, second.version) == (1, 2)
    again = pipeline.producer.submit("tenant-1", change([account], entity_id="evt-x", title="B"), request_key="k")
    assert again == second  # the key now answers for the second request


def test_keys_are_per_tenant(pipeline: Pipeline) -> None:
    mine = pipeline.account(tenant="tenant-1", account_id="acc-1")
    theirs = pipeline.account(tenant="tenant-2", account_id="acc-2")
    a = pipeline.producer.submit("tenant-1", change([mine], title="A"), request_key="same")
    b = pipeline.producer.submit("tenant-2", change([theirs], title="B"), request_key="same")
    assert a.entity_id != b.entity_id


def test_concurrent_identical_requests_create_one_version(pipeline: Pipeline) -> None:
    account = pipeline.account()
    pipeline.producer.submit("tenant-1", change([account], entity_id="evt-c", title="v1"))
    doc = change([account], entity_id="evt-c", title="v2")
    start = threading.Barrier(8)
    receipts: list[Receipt] = []
    errors: list[BaseException] = []

    def send() -> None:
        start.wait()
        try:
            receipts.append(pipeline.producer.submit("tenant-1", doc, request_key="twin"))
        except BaseException as exc:
            errors.append(exc)

    in_threads(lambda _: send(), 8)

    assert errors == []
    assert {(r.entity_id, r.version) for r in receipts} == {("evt-c", 2)}
    assert _version(pipeline, "evt-c") == 2


def test_a_twin_that_comes_while_the_first_request_enqueues_waits_for_its_receipt(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    account = pipeline.account()
    found_without_receipt = threading.Event()
    find = intake_requests.find

    def spied_find(*args: Any) -> intake_requests.IntakeRequest | None:
        first = find(*args)
        if first is not None and first.receipt is None:
            found_without_receipt.set()
        return first

    monkeypatch.setattr(intake_requests, "find", spied_find)
    queue = MemoryQueue()

    # The first request, committed, enqueues once its twin is waiting.
    def enqueue(payload: JobPayload, lane: Lane, delay_ms: int | None) -> None:
        wait_until(found_without_receipt.is_set, what="the twin to find the key claimed, its receipt not stored")
        queue(payload, lane, delay_ms)

    intake = Intake(pipeline.clients.db, MemoryMarkers(), enqueue, default_send_updates="none")
    receipts: list[Receipt] = []
    in_threads(lambda _: receipts.append(intake.submit("tenant-1", change([account]), request_key="k")), 2)

    assert len(queue.payloads) == 1
    assert receipts == [Receipt(receipts[0].entity_id, 1, [queue.payloads[0].job_id])] * 2


class _Killed(BaseException):
    """The first request's process dies between its commit and its enqueue."""


def test_a_receipt_the_first_request_never_stored_is_completed_once_by_a_replay(pipeline: Pipeline) -> None:
    account = pipeline.account()

    def killed(payload: JobPayload, lane: Lane, delay_ms: int | None) -> None:
        raise _Killed

    dying = Intake(pipeline.clients.db, MemoryMarkers(), killed, default_send_updates="none")
    with pytest.raises(_Killed):
        dying.submit("tenant-1", change([account]), request_key="k")
    with pipeline.clients.db.write() as conn:  # its change committed, its receipt never stored, its grace over
        grace_over = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=OWNER_GRACE)
        conn.execute(update(intake_requests_table).values(created_at=grace_over))
        first = intake_requests.find(conn, "tenant-1", "k")
    assert first is not None and first.receipt is None

    replayed = pipeline.producer.submit("tenant-1", change([account]), request_key="k")
    again = pipeline.producer.submit("tenant-1", change([account]), request_key="k")

    assert replayed == again == Receipt(first.entity_id, 1, [], deferred_accounts=[account])
    resumed = store_receipt(pipeline.clients.db, "tenant-1", "k", Receipt(first.entity_id, 1, ["job-late"]))
    assert resumed == replayed  # the first receipt stored is the key's for good
    assert pipeline.target(first.entity_id, account).status == "pending"  # left to the reconciler
