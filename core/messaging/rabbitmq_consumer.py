"""Dramatiq's RabbitmqBroker with a consumer that no message can poison; the one module that relies on the
private parts of Dramatiq's RabbitMQ broker.

Dramatiq's RabbitMQ consumer rejects a body it cannot decode into its XQ only, and hands any decodable
envelope to the worker threads, whatever its ``queue_name`` (which kills the thread that runs it). This
consumer puts every delivery through the :class:`~core.messaging.quarantine.Door` first: what is refused
is stored by the quarantine, then acked (docs/notes/dramatiq.md §poison). While ``calsync pause`` is on it
cancels its consumer, so RabbitMQ takes back what the channel had buffered (a requeue, not an attempt).

Reliance on Dramatiq's private API (read in Dramatiq 2.2's source; pinned by
tests/messaging/test_dramatiq_contract.py, which fails on an upgrade that changes any of it):

- ``dramatiq.brokers.rabbitmq._RabbitmqConsumer``, subclassed: its constructor ``(broker, queue_name,
  prefetch, timeout)``, its ``ack``/``nack``/``requeue``/``close`` and its attributes ``connection``,
  ``channel``, ``iterator`` and ``known_tags`` (the delivery tags its ack and nack accept): the consumer
  replaces only ``__next__``.
- ``dramatiq.brokers.rabbitmq._RabbitmqMessage(redelivered, tag, message)``: the delivery Dramatiq's ack and
  nack read the tag of.
- ``RabbitmqBroker.consumer_class``: the property ``consume()`` builds each queue's consumer from.
- ``broker.queues_pending``: where Dramatiq's consumer notes a queue that vanished (404), to declare it again.
- ``RabbitmqBroker._build_queue_arguments(queue_name)``, the arguments ``_declare_queue`` and ``_declare_dq_queue``
  declare the queue and its delay queue with, and ``_declare_xq_queue(queue_name)``, which declares the dead-letter
  queue: overridden for quorum queues.

Quorum queues (``queue_type="quorum"``, RabbitMQ 3.10 or later: their message TTL is needed for the dead-letter
queue) are replicated across the cluster's nodes and survive a node's loss, where a classic queue lives on one
node. Each of a queue's three (``<q>``, its delay queue ``<q>.DQ`` and its dead-letter queue ``<q>.XQ``) is
declared ``x-queue-type: quorum``; the first two also get ``x-delivery-limit``, a second poison guard behind the
door: a message delivered ``DELIVERY_LIMIT`` times without an ack (its worker died each time it ran it) goes to
``<q>.XQ`` instead of killing workers forever, and its target, still pending in the database, is re-enqueued by
the reconciler. RabbitMQ refuses to redeclare an existing queue with another type (``PRECONDITION_FAILED``): an
existing deployment moves to quorum queues under new queue names (docs/DEPLOY.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, Final, Literal

import dramatiq
import pika.exceptions
from dramatiq.brokers.rabbitmq import DEAD_MESSAGE_TTL, RabbitmqBroker, _RabbitmqConsumer, _RabbitmqMessage
from dramatiq.common import q_name, xq_name
from dramatiq.errors import ConnectionClosed

from calsync.core.messaging.consumer_pause import pause_of
from calsync.core.messaging.quarantine import Arrival, Door, Quarantined

_AMQP_ERRORS = (pika.exceptions.AMQPConnectionError, pika.exceptions.AMQPChannelError)
#: Deliveries of one message on a quorum queue before RabbitMQ moves it to the dead-letter queue: far above what a
#: healthy message sees (a redelivery per worker crash, pause or connection loss while it was in flight).
DELIVERY_LIMIT: Final = 20


class SafeRabbitmqBroker(RabbitmqBroker):
    """A RabbitmqBroker whose consumers admit only messages a worker thread can run (the rest is quarantined)."""

    def __init__(
        self,
        *,
        max_message_bytes: int,
        overflow: Mapping[str, str] | None = None,
        queue_type: Literal["classic", "quorum"] = "classic",
        **kwargs: Any,
    ) -> None:
        self.quorum = queue_type == "quorum"  # before Dramatiq's constructor, which may declare queues
        super().__init__(**kwargs)
        self.door = Door(self, max_message_bytes, dict(overflow or {}))

    def _build_queue_arguments(self, queue_name: str) -> dict[str, Any]:
        arguments: dict[str, Any] = super()._build_queue_arguments(queue_name)  # type: ignore[no-untyped-call]
        if self.quorum:
            arguments.update({"x-queue-type": "quorum", "x-delivery-limit": DELIVERY_LIMIT})
        return arguments

    def _declare_xq_queue(self, queue_name: str) -> Any:
        if not self.quorum:
            return super()._declare_xq_queue(queue_name)  # type: ignore[no-untyped-call]
        arguments = {"x-queue-type": "quorum", "x-message-ttl": DEAD_MESSAGE_TTL}  # Dramatiq's TTL, no delivery limit
        return self.channel.queue_declare(queue=xq_name(queue_name), durable=True, arguments=arguments)

    @property
    def consumer_class(self) -> type[_SafeRabbitmqConsumer]:
        """Dramatiq's extension point for the consumer a queue gets."""
        return _SafeRabbitmqConsumer


class _SafeRabbitmqConsumer(_RabbitmqConsumer):
    """Dramatiq's RabbitMQ consumer, with the door between the channel and the worker threads."""

    broker: SafeRabbitmqBroker

    def __init__(self, broker: SafeRabbitmqBroker, queue_name: str, prefetch: int, timeout: int) -> None:
        super().__init__(broker, queue_name, prefetch, timeout)  # type: ignore[no-untyped-call]
        self.timeout = timeout  # ms; the pause before a delivery the quarantine could not take comes back
        self.pause = pause_of(broker)  # consumers are built after the middleware
        self.consuming = True  # Dramatiq's __init__ started the basic_consume

    def __next__(self) -> dramatiq.MessageProxy | None:
        try:
            if self._paused():
                return None
            method, properties, body = next(self.iterator)
            if method is None:
                return None
        except (AssertionError, *_AMQP_ERRORS) as e:
            if getattr(e, "reply_code", None) == 404:  # as Dramatiq: the queue vanished, declare it again
                self.broker.queues_pending.add(q_name(self.queue_name))
            raise ConnectionClosed(e) from None  # type: ignore[no-untyped-call]
        tag = method.delivery_tag
        details = {
            "exchange": method.exchange,
            "routing_key": method.routing_key,
            "redelivered": bool(method.redelivered),
            "amqp_message_id": getattr(properties, "message_id", None),
        }
        how = f"basic_deliver {self.queue_name}"
        arrival = Arrival("rabbitmq", self.queue_name, str(tag), how, unique_id=False, details=details)
        admitted = self.broker.door.admit(body, arrival)
        if isinstance(admitted, Quarantined):
            channel = self.channel
            self.broker.door.quarantine(admitted, ack=self._on_connection(channel.basic_ack, tag),
                                        reject=self._on_connection(channel.basic_nack, tag, requeue=False),
                                        keep=self._on_connection(channel.basic_nack, tag, requeue=True),
                                        pause=self.timeout / 1000)  # fmt: skip
            return None
        self.known_tags.add(tag)
        return _RabbitmqMessage(method.redelivered, tag, admitted)  # type: ignore[no-untyped-call]

    def _paused(self) -> bool:
        """While paused, no consumer: what the channel had buffered goes back to the queue (a requeue, not an
        attempt); the connection keeps serving heartbeats and the worker threads' acks. Resumed: consume again."""
        if self.pause is None:
            return False
        if not self.pause.paused(self.queue_name):
            if not self.consuming:
                self.iterator = self.channel.consume(self.queue_name, inactivity_timeout=self.timeout / 1000)
                self.consuming = True
            return False
        if self.consuming:
            self.channel.cancel()  # pika rejects (requeue=True) every delivery buffered or still arriving
            self.consuming = False
        self.connection.process_data_events(time_limit=self.timeout / 1000)
        return True

    def _on_connection(self, ack_or_nack: Callable[..., None], tag: int, **kwargs: Any) -> Callable[[], None]:
        """The ack or nack of ``tag``, to run on the connection's own thread as Dramatiq's do."""

        def settle() -> None:
            try:
                self.connection.add_callback_threadsafe(partial(ack_or_nack, tag, **kwargs))
            except _AMQP_ERRORS as e:
                raise ConnectionClosed(e) from None  # type: ignore[no-untyped-call]

        return settle
