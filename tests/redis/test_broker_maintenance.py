"""A dead worker's messages come back on a fixed cadence, not only on Dramatiq's random maintenance draw."""

from __future__ import annotations

import pytest

from calsync.core.messaging.redis_consumer import SafeRedisBroker

DEAD_WORKER = "dead-worker"
QUEUE = "calendar"


def _broker(redis_url: str, namespace: str, *, interval: float) -> SafeRedisBroker:
    # A maintenance chance of 1 in Dramatiq's million: the draw practically never fires, only the interval can.
    return SafeRedisBroker(
        max_message_bytes=1024 * 1024,
        maintenance_interval=interval,
        url=redis_url,
        namespace=namespace,
        heartbeat_timeout=1000,
        maintenance_chance=1,
    )


def _strand(broker: SafeRedisBroker, namespace: str) -> None:
    # A message fetched by a worker whose last heartbeat was long ago (it was SIGKILLed mid-job).
    client = broker.client
    client.hset(f"{namespace}:{QUEUE}.msgs", "m1", b"{}")
    client.sadd(f"{namespace}:__acks__.{DEAD_WORKER}.{QUEUE}", "m1")
    client.zadd(f"{namespace}:__heartbeats__", {DEAD_WORKER: 1})


@pytest.mark.parametrize(("interval", "requeued"), [(0.001, True), (1e12, False)])
def test_dead_workers_messages_are_requeued_within_the_interval(
    redis_url: str, namespace: str, interval: float, requeued: bool
) -> None:
    broker = _broker(redis_url, namespace, interval=interval)
    try:
        _strand(broker, namespace)
        fetched = [message_id for message_id, _ in broker.fetch_pairs(QUEUE, 10)]
        assert fetched == (["m1"] if requeued else [])
    finally:
        broker.close()
