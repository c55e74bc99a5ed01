"""Enqueueing many messages at once, each with its own delay; per message, whether it was enqueued.

A fan-out enqueues one job per target. Brokers that can send a batch in one round trip (the Redis
broker, core/messaging/redis_batch.py) do; any other broker enqueues the messages one by one. Either
way the answer says, per message, whether it is on its queue, so the caller can leave the rest to the
reconciler: a failed part of a batch never makes the other parts fail or be lost.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

import dramatiq

log = logging.getLogger(__name__)


class Outgoing(NamedTuple):
    """One message to enqueue, at once (``delay_ms`` None) or that many milliseconds later."""

    message: dramatiq.Message[Any]
    delay_ms: int | None = None


@runtime_checkable
class BatchBroker(Protocol):
    """A broker that enqueues a batch of messages itself."""

    def enqueue_many(self, outgoing: Sequence[Outgoing]) -> list[bool]:
        """Per message (in order), whether it was enqueued."""
        ...


def enqueue_many(broker: dramatiq.Broker, outgoing: Sequence[Outgoing]) -> list[bool]:
    """Enqueue ``outgoing`` on ``broker``: per message (in order), whether it was enqueued."""
    if isinstance(broker, BatchBroker):
        return broker.enqueue_many(outgoing)
    return enqueue_each(broker, outgoing)


def enqueue_each(broker: dramatiq.Broker, outgoing: Sequence[Outgoing]) -> list[bool]:
    """One ``broker.enqueue`` per message; a failed one is logged and the next is still tried."""
    sent = []
    for message, delay_ms in outgoing:
        try:
            broker.enqueue(message, delay=delay_ms)
        except Exception:
            log.exception("enqueue failed", extra={"fields": {"message_id": message.message_id}})
            sent.append(False)
        else:
            sent.append(True)
    return sent
