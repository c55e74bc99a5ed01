"""The Dramatiq broker, built from settings: Redis (default, embedded when unset) or RabbitMQ.

Both are Dramatiq's brokers with a consumer that quarantines what a worker cannot run
(``core/messaging/quarantine.py``); producers only enqueue, so they never reach that code.

Redis is tuned so a SIGKILLed worker's in-flight messages come back quickly: a short
``heartbeat_timeout`` and a high ``maintenance_chance`` (Dramatiq's defaults, 60 s and 0.1 %, make
recovery take ~10 minutes on average; see docs/ARCHITECTURE.md).

Both lanes of sync jobs are declared (core/messaging/lanes.py): a worker gets a consumer thread for
each, and the door admits the sync actor from the bulk lane too.
"""

from __future__ import annotations

from collections.abc import Sequence

import dramatiq

from calsync.core.config.settings import Settings, broker_kind
from calsync.core.messaging.lanes import lanes_of
from calsync.core.messaging.redis_consumer import SafeRedisBroker

_MAINTENANCE_SCALE = 1_000_000  # Dramatiq's unit for maintenance_chance


def connect_broker(url: str, settings: Settings, middleware: Sequence[dramatiq.Middleware] = ()) -> dramatiq.Broker:
    """A broker on ``url`` with ``middleware`` (none for producers) and both lanes of the calsync queue declared."""
    lanes = lanes_of(settings)
    broker: dramatiq.Broker
    if broker_kind(url) == "rabbitmq":
        from calsync.core.messaging.rabbitmq_consumer import SafeRabbitmqBroker  # pika only where it is used

        broker = SafeRabbitmqBroker(
            url=url, middleware=list(middleware), confirm_delivery=True, max_message_bytes=settings.max_message_bytes,
            overflow=lanes.overflow, queue_type=settings.rabbitmq_queue_type,
        )  # fmt: skip
    else:
        broker = SafeRedisBroker(
            max_message_bytes=settings.max_message_bytes,
            overflow=lanes.overflow,
            url=url,
            namespace=settings.redis_namespace,
            heartbeat_timeout=int(settings.broker_heartbeat_timeout * 1000),
            maintenance_chance=int(settings.broker_maintenance_chance * _MAINTENANCE_SCALE),
            maintenance_interval=2,  # at least this often per queue and process: a dead worker's never wait on the draw
            middleware=list(middleware),
        )
    for queue in lanes.queues:
        broker.declare_queue(queue)
    return broker
