"""What ``dramatiq`` loads to run the hand-written job (benchmarks/hand_written.py) beside calsync.

Dramatiq's default middleware; its Redis, namespace, database (a SQLite file or a postgresql:// URL),
the provider's SQLite file and latency come from ``BENCH_REDIS_URL``, ``BENCH_NAMESPACE``,
``BENCH_DATABASE``, ``BENCH_PROVIDER_FILE`` and ``BENCH_LATENCY_MS`` (set by benchmarks/worker.py).
"""

from __future__ import annotations

import os

import dramatiq
import redis
from dramatiq.brokers.redis import RedisBroker

from benchmarks.hand_written import HandWrittenJob

broker = RedisBroker(url=os.environ["BENCH_REDIS_URL"], namespace=os.environ["BENCH_NAMESPACE"])
dramatiq.set_broker(broker)
job = HandWrittenJob(
    os.environ["BENCH_DATABASE"],
    redis.Redis.from_url(os.environ["BENCH_REDIS_URL"]),
    os.environ["BENCH_NAMESPACE"],
    os.environ["BENCH_PROVIDER_FILE"],
    float(os.environ.get("BENCH_LATENCY_MS", "0")) / 1000,
)


@dramatiq.actor(broker=broker, actor_name="sync", queue_name="calendar", max_retries=0)
def sync(tenant: str, entity: str, account: str, version: int, key: str, job_id: str) -> None:
    """One sync job, by hand."""
    job.run(tenant, entity, account, version, key, job_id)
