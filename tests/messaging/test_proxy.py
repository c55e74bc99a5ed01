"""Deliveries read their message's fields as properties, with the values Dramatiq's proxy gives."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator

import dramatiq
import pytest
from dramatiq.broker import MessageProxy

from calsync.core.messaging.proxy import FieldedProxy
from calsync.core.messaging.redis_consumer import SafeRedisBroker
from tests.integration import test_ack_later
from tests.integration.test_ack_later import QUEUE

broker = test_ack_later.broker  # a SafeRedisBroker on the shared Redis, in a namespace of the test's own


def _message() -> dramatiq.Message[object]:
    return dramatiq.Message(queue_name="calendar", actor_name="sync", args=(1, "a"), kwargs={"k": 2},
                            options={"retries": 3}, message_id="m-1", message_timestamp=17)  # fmt: skip


def test_every_field_reads_as_through_dramatiqs_proxy() -> None:
    message = _message()
    ours, theirs = FieldedProxy(message), MessageProxy(message)
    for field in dataclasses.fields(message):
        assert getattr(ours, field.name) == getattr(theirs, field.name) == getattr(message, field.name)
    assert "message_id" in vars(FieldedProxy) and "options" in vars(FieldedProxy)


def test_the_rest_still_reaches_the_message() -> None:
    proxy = FieldedProxy(_message())
    assert proxy.asdict() == _message().asdict()
    proxy.fail()
    assert proxy.failed


def test_fields_stay_read_only_like_the_frozen_message() -> None:
    with pytest.raises(AttributeError):
        FieldedProxy(_message()).message_id = "other"  # type: ignore[misc]


def _next_delivery(consumer: Iterator[MessageProxy | None]) -> MessageProxy:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        delivery = next(consumer)
        if delivery is not None:
            return delivery
    raise AssertionError("no delivery within 10 s")


def test_the_redis_consumer_delivers_fielded_proxies(broker: SafeRedisBroker) -> None:
    actor = dramatiq.actor(broker=broker, actor_name="fielded", queue_name=QUEUE)(lambda: None)
    sent = actor.send()
    consumer = broker.consume(QUEUE, prefetch=1, timeout=100)
    try:
        delivery = _next_delivery(consumer)
        assert isinstance(delivery, FieldedProxy) and delivery.message_id == sent.message_id
        consumer.ack(delivery)
    finally:
        consumer.close()
