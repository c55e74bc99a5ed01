"""Acks sent without waiting (core/messaging/redis_consumer.py): each lands, and one whose answer fails is redone."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import dramatiq
import pytest
import redis

from calsync.core.messaging.redis_consumer import SafeRedisBroker
from tests.support import Pipeline, wait_until

QUEUE = "acks"


def _broker(url: str, namespace: str) -> Iterator[SafeRedisBroker]:
    built = SafeRedisBroker(max_message_bytes=1 << 20, maintenance_interval=60, url=url, namespace=namespace)
    built.declare_queue(QUEUE)
    yield built
    built.close()


@pytest.fixture
def broker(redis_url: str, namespace: str) -> Iterator[SafeRedisBroker]:
    yield from _broker(redis_url, namespace)


def fetched(broker: SafeRedisBroker, count: int) -> list[str]:
    """Enqueue ``count`` messages and fetch them into this broker's ack set, as a consumer does."""
    for _ in range(count):
        broker.enqueue(dramatiq.Message(queue_name=QUEUE, actor_name="noop", args=(), kwargs={}, options={}))
    ids = [message_id for message_id, _ in broker.fetch_pairs(QUEUE, count)]
    assert len(ids) == count
    return ids


def unacked(broker: SafeRedisBroker) -> set[str]:
    """The ids still in this broker's ack set for the queue (fetched, not acked)."""
    members = broker.client.smembers(f"{broker.namespace}:__acks__.{broker.broker_id}.{QUEUE}")
    return {member.decode() for member in members}


def stored(broker: SafeRedisBroker) -> set[str]:
    """The ids whose bodies the queue's message hash still holds."""
    return {key.decode() for key in broker.client.hkeys(f"{broker.namespace}:{QUEUE}.msgs")}


class Recorder:
    """A sender that records what it was given and sends nothing; the test answers for Redis."""

    def __init__(self, *, refuse: bool = False) -> None:
        self.refuse = refuse
        self.sent: list[tuple[Sequence[Any], Callable[[Any], None]]] = []

    def send_later(self, args: Sequence[Any], on_answer: Callable[[Any], None]) -> None:
        if self.refuse:
            raise redis.ConnectionError("the connection dropped while sending")
        self.sent.append((args, on_answer))


def test_an_ack_whose_answer_never_came_is_redone_before_the_next_ack(broker: SafeRedisBroker) -> None:
    sender = Recorder()
    broker.send_acks_with(sender)
    lost, other = fetched(broker, 2)
    broker.ack(QUEUE, lost)
    ((_, on_answer),) = sender.sent
    on_answer(redis.ConnectionError("the connection dropped before the answer was read"))
    assert unacked(broker) == {lost, other}
    broker.ack(QUEUE, other)  # redoes the lost one, waiting, then sends its own
    assert unacked(broker) == {other}
    assert len(sender.sent) == 2


def test_acks_owed_at_close_are_redone(broker: SafeRedisBroker) -> None:
    sender = Recorder()
    broker.send_acks_with(sender)
    (message_id,) = fetched(broker, 1)
    broker.ack(QUEUE, message_id)
    sender.sent[0][1](redis.ConnectionError("closed before the answers were read"))
    broker.close()
    assert unacked(broker) == set() and stored(broker) == set()


def test_an_ack_that_cannot_be_sent_is_made_at_once(broker: SafeRedisBroker) -> None:
    broker.send_acks_with(Recorder(refuse=True))
    (message_id,) = fetched(broker, 1)
    broker.ack(QUEUE, message_id)
    assert unacked(broker) == set() and stored(broker) == set()


@pytest.mark.integration
def test_a_worker_leaves_no_message_unacked(pipeline: Pipeline) -> None:
    broker = pipeline.broker
    assert isinstance(broker, SafeRedisBroker)
    account = pipeline.account()
    with pipeline.worker(threads=4):
        receipts = [pipeline.submit([account], entity_id=f"evt-{n}") for n in range(20)]
        pipeline.wait_idle()
        acks = f"{broker.namespace}:__acks__.{broker.broker_id}.{pipeline.settings.queue}"
        wait_until(lambda: broker.client.scard(acks) == 0, what="every delivery to be acked")
    assert len(receipts) == 20
    assert not broker.client.hlen(f"{broker.namespace}:{pipeline.settings.queue}.msgs")
