"""The envelope check on its own (no services): each rule admits the right message and refuses its breaks."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import dramatiq
import pytest
from dramatiq.brokers.stub import StubBroker

from calsync.core.messaging.envelope import EnvelopeCheck, Refused
from calsync.core.messaging.lanes import Lanes
from calsync.core.model.payload import SYNC_JOB
from calsync.core.model.vocabulary import Refusal


@pytest.fixture
def broker() -> Iterator[StubBroker]:
    stub = StubBroker(middleware=[])

    def one_arg(payload: dict[str, Any]) -> None:
        """An actor taking exactly one argument."""

    dramatiq.actor(one_arg, broker=stub, queue_name="calendar", actor_name="one_arg")
    dramatiq.actor(one_arg, broker=stub, queue_name="intake", actor_name="elsewhere")
    yield stub
    stub.close()


def _doc(**over: Any) -> dict[str, Any]:
    doc = {"queue_name": "calendar", "actor_name": "one_arg", "args": [{}], "kwargs": {},
           "options": {"redis_message_id": "rid"}, "message_id": "m-1", "message_timestamp": 1}  # fmt: skip
    doc.update(over)
    return doc


def _read(broker: StubBroker, body: bytes | None, *, queue: str = "calendar", rid: str | None = "rid") -> Any:
    return EnvelopeCheck(broker, max_bytes=4096).read(body, queue, rid)


def test_a_good_envelope_is_admitted_as_it_was_sent(broker: StubBroker) -> None:
    message = _read(broker, json.dumps(_doc()).encode())
    assert isinstance(message, dramatiq.Message)
    assert (message.queue_name, message.args, message.options) == ("calendar", ({},), {"redis_message_id": "rid"})
    delayed = _read(broker, json.dumps(_doc(queue_name="calendar.DQ")).encode(), queue="calendar.DQ")
    assert isinstance(delayed, dramatiq.Message)
    assert isinstance(_read(broker, json.dumps(_doc(options={})).encode(), rid=None), dramatiq.Message)  # RabbitMQ


@pytest.mark.parametrize(
    ("body", "refusal"),
    [
        (None, Refusal.NO_BODY),
        (b"x" * 5000, Refusal.TOO_LARGE),
        (b"\xc3\x28", Refusal.NOT_UTF8),
        (b"{", Refusal.NOT_JSON),
        (b'{"a": Infinity}', Refusal.NOT_JSON),
        (b"null", Refusal.NOT_ENVELOPE),
        (json.dumps({k: v for k, v in _doc().items() if k != "kwargs"}).encode(), Refusal.NOT_ENVELOPE),
        (json.dumps(_doc(extra=1)).encode(), Refusal.NOT_ENVELOPE),
        (json.dumps(_doc(message_timestamp=True)).encode(), Refusal.NOT_ENVELOPE),
        (json.dumps(_doc(message_timestamp=1.5)).encode(), Refusal.NOT_ENVELOPE),
        (json.dumps(_doc(message_id="")).encode(), Refusal.NOT_ENVELOPE),
        (json.dumps(_doc(message_id="m" * 65)).encode(), Refusal.NOT_ENVELOPE),
        (json.dumps(_doc(queue_name="calendar.DQ")).encode(), Refusal.WRONG_QUEUE),
        (json.dumps(_doc(actor_name="elsewhere")).encode(), Refusal.WRONG_QUEUE),
        (json.dumps(_doc(actor_name="nobody")).encode(), Refusal.UNKNOWN_ACTOR),
        (json.dumps(_doc(args=[])).encode(), Refusal.BAD_ARGUMENTS),
        (json.dumps(_doc(kwargs={"other": 1})).encode(), Refusal.BAD_ARGUMENTS),
        (json.dumps(_doc(options={})).encode(), Refusal.BROKER_ID),
        (json.dumps(_doc(options={"redis_message_id": "other"})).encode(), Refusal.BROKER_ID),
        (json.dumps(_doc(options={"redis_message_id": "rid", "throws": "X"})).encode(), Refusal.BAD_OPTION),
        (json.dumps(_doc(options={"redis_message_id": "rid", "eta": "soon"})).encode(), Refusal.BAD_OPTION),
        (json.dumps(_doc(options={"redis_message_id": "rid", "eta": time.time() * 1000 + 8 * 86_400_000})).encode(),
         Refusal.BAD_OPTION),
        (json.dumps(_doc(options={"redis_message_id": "rid", "time_limit": 0})).encode(), Refusal.BAD_OPTION),
        (json.dumps(_doc(options={"redis_message_id": "rid", "retries": -1})).encode(), Refusal.BAD_OPTION),
        (json.dumps(_doc(options={"redis_message_id": "rid", "broker_priority": 300})).encode(), Refusal.BAD_OPTION),
        (json.dumps(_doc(options={"redis_message_id": "rid", "notify_shutdown": "yes"})).encode(), Refusal.BAD_OPTION),
    ],
)  # fmt: skip
def test_each_break_is_refused_with_its_reason(broker: StubBroker, body: bytes | None, refusal: Refusal) -> None:
    verdict = _read(broker, body)
    assert isinstance(verdict, Refused) and verdict.refusal is refusal and verdict.detail


# --- the bulk lane (core/messaging/lanes.py): the sync actor only, from its own queue's lane ---------------


@pytest.fixture
def lanes_broker() -> Iterator[StubBroker]:
    stub = StubBroker(middleware=[])

    def one_arg(payload: dict[str, Any]) -> None:
        """An actor taking exactly one argument."""

    dramatiq.actor(one_arg, broker=stub, queue_name="calendar", actor_name=SYNC_JOB)
    dramatiq.actor(one_arg, broker=stub, queue_name="calendar", actor_name="reconcile_like")
    yield stub
    stub.close()


def _read_lane(broker: StubBroker, doc: dict[str, Any], queue: str) -> Any:
    check = EnvelopeCheck(broker, max_bytes=4096, overflow=Lanes("calendar", "calendar-bulk").overflow)
    return check.read(json.dumps(doc).encode(), queue, "rid")


@pytest.mark.parametrize("queue", ["calendar", "calendar-bulk", "calendar-bulk.DQ"])
def test_the_sync_actor_is_admitted_from_both_lanes_and_their_delay_queues(
    lanes_broker: StubBroker, queue: str
) -> None:
    message = _read_lane(lanes_broker, _doc(actor_name=SYNC_JOB, queue_name=queue), queue)
    assert isinstance(message, dramatiq.Message) and message.queue_name == queue


@pytest.mark.parametrize(
    ("actor", "queue"),
    [("reconcile_like", "calendar-bulk"), (SYNC_JOB, "other-bulk"), (SYNC_JOB, "intake")],
)
def test_only_the_sync_actor_rides_the_bulk_lane_and_only_its_own_queues_lane(
    lanes_broker: StubBroker, actor: str, queue: str
) -> None:
    refused = _read_lane(lanes_broker, _doc(actor_name=actor, queue_name=queue), queue)
    assert isinstance(refused, Refused) and refused.refusal == Refusal.WRONG_QUEUE
    assert isinstance(_read(lanes_broker, json.dumps(_doc(actor_name=SYNC_JOB, queue_name="calendar-bulk")).encode(),
                            queue="calendar-bulk"), Refused)  # fmt: skip  # no overflow given: no lane


def test_an_actor_taking_anything_is_admitted_with_any_arguments(broker: StubBroker) -> None:
    def anything(*args: Any, **kwargs: Any) -> None:
        """An actor that checks its own arguments (as the sync actor does)."""

    def some(first: Any, *rest: Any, **kwargs: Any) -> None:
        """An actor that needs at least one argument."""

    dramatiq.actor(anything, broker=broker, queue_name="calendar", actor_name="anything")
    dramatiq.actor(some, broker=broker, queue_name="calendar", actor_name="some")
    for args, kwargs in (([], {}), ([1, 2, 3], {"k": 1})):
        body = json.dumps(_doc(actor_name="anything", args=args, kwargs=kwargs)).encode()
        assert isinstance(_read(broker, body), dramatiq.Message)
    refused = _read(broker, json.dumps(_doc(actor_name="some", args=[])).encode())
    assert isinstance(refused, Refused) and refused.refusal is Refusal.BAD_ARGUMENTS
