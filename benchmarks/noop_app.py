"""The bare side of benchmarks/worker.py: what ``dramatiq`` loads to run a no-op actor, default middleware.

Its Redis and namespace come from ``BENCH_REDIS_URL`` and ``BENCH_NAMESPACE`` (set by the benchmark).
"""

from __future__ import annotations

import os

import dramatiq
from dramatiq.brokers.redis import RedisBroker

broker = RedisBroker(url=os.environ["BENCH_REDIS_URL"], namespace=os.environ["BENCH_NAMESPACE"])
dramatiq.set_broker(broker)


@dramatiq.actor(broker=broker, actor_name="noop", queue_name="calendar", max_retries=0)
def noop() -> None:
    """Do nothing: the cost of Dramatiq itself."""
