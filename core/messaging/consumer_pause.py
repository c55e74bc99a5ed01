"""What a consumer asks before every fetch: is processing paused (``calsync pause``)?

The worker's answer is a middleware (core/worker/pause.py); the consumers (redis_consumer.py,
rabbitmq_consumer.py) find it among the broker's middleware. While paused they give back what they
prefetched and fetch nothing, so a paused message stays on the broker, untouched: no attempt is used,
nothing is lost. Deliveries already on a worker thread finish.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import dramatiq


@runtime_checkable
class ConsumerPause(Protocol):
    """Says whether the consumer of a queue must hand out nothing right now."""

    def paused(self, queue_name: str) -> bool:
        """True while the consumer of ``queue_name`` must hand out nothing (cheap: asked on every turn)."""


def pause_of(broker: dramatiq.Broker) -> ConsumerPause | None:
    """The middleware of ``broker`` that pauses its consumers, if it has one (producers have none)."""
    return next((m for m in broker.middleware if isinstance(m, ConsumerPause)), None)
