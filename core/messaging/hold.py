"""What tells a consumer to hand out nothing for now (``calsync pause``), found among the broker's middleware.

The consumers (redis_consumer.py, rabbitmq_consumer.py) ask on every turn; while held they give back what
they prefetched and fetch nothing, so a held message stays on the broker, untouched: no attempt is used,
nothing is lost. Deliveries already on a worker thread finish.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import dramatiq


@runtime_checkable
class ConsumerHold(Protocol):
    """Says whether the consumer of a queue must hold its deliveries right now."""

    def holding(self, queue_name: str) -> bool:
        """True while the consumer of ``queue_name`` must hand out nothing (cheap: called on every turn)."""


def hold_of(broker: dramatiq.Broker) -> ConsumerHold | None:
    """The middleware of ``broker`` that can hold its consumers, if it has one (producers have none)."""
    for middleware in broker.middleware:
        if isinstance(middleware, ConsumerHold):
            return middleware
    return None
