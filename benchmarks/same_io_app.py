"""The hand-written side of benchmarks/worker.py: what ``dramatiq`` loads to run the job's I/O by hand.

Default middleware, no calsync code around the job (benchmarks/same_io.py). Its Redis, namespace,
database (a SQLite file or a postgresql:// URL) and memory-provider file come from ``BENCH_REDIS_URL``,
``BENCH_NAMESPACE``, ``BENCH_DATABASE`` and ``BENCH_MEMORY_FILE`` (set by the benchmark).
"""

from __future__ import annotations

import os

import dramatiq
import redis
from dramatiq.brokers.redis import RedisBroker

from benchmarks.same_io import SameIo
from calsync.providers.memory import MemoryProvider

broker = RedisBroker(url=os.environ["BENCH_REDIS_URL"], namespace=os.environ["BENCH_NAMESPACE"])
dramatiq.set_broker(broker)
job = SameIo(os.environ["BENCH_DATABASE"], redis.Redis.from_url(os.environ["BENCH_REDIS_URL"]),
             os.environ["BENCH_NAMESPACE"], MemoryProvider(os.environ["BENCH_MEMORY_FILE"]))  # fmt: skip


@dramatiq.actor(broker=broker, actor_name="sync", queue_name="calendar", max_retries=0)
def sync(tenant: str, entity: str, account_id: str, key: str, job_id: str) -> None:
    """One sync job's I/O, by hand."""
    job.sync(tenant, entity, account_id, key, job_id)
