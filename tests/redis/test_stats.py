"""Job outcome counters: batched by workers, never dropped on a Redis error."""

from __future__ import annotations

import time

import pytest
import redis

from calsync.core.redis.keys import RedisKeys
from calsync.core.redis.stats import JobStats
from tests.support import wait_until


def test_a_worker_batches_its_counts_and_writes_them_within_the_flush_interval(
    client: redis.Redis, namespace: str
) -> None:
    stats = JobStats(client, RedisKeys(namespace), flush_every=0.05)
    for _ in range(3):
        stats.record("success")
    stats.record("stale")
    wait_until(lambda: stats.totals() == {"success": 3, "stale": 1}, timeout=10, what="the flusher to write")
    stats.record("success")
    stats.close()  # shutdown writes what is left
    assert stats.totals() == {"success": 4, "stale": 1}
    ttl = client.ttl(RedisKeys(namespace).stats(int(time.time() // 60)))
    assert 0 < ttl <= 86400


def test_counts_survive_a_redis_outage(client: redis.Redis, namespace: str) -> None:
    down = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    stats = JobStats(down, RedisKeys(namespace), flush_every=60)
    stats.record("success", count=5)
    with pytest.raises(redis.ConnectionError):
        stats.flush()
    stats._client = client  # Redis is back (the shared server cannot be stopped from a test)
    stats.flush()
    assert JobStats(client, RedisKeys(namespace)).totals() == {"success": 5}
