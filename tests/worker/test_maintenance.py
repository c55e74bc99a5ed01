"""Housekeeping in workers: one pass per interval across processes (the Redis lease), run by a worker's thread."""

from __future__ import annotations

import datetime as dt
from typing import Any

import dramatiq
import pytest
import redis
from prometheus_client import REGISTRY
from sqlalchemy import func, select

from calsync.core.messaging.outage import RedisOutage
from calsync.core.redis.keys import RedisKeys
from calsync.core.store import idempotency
from calsync.core.store.database import Database
from calsync.core.store.pruning import Retention
from calsync.core.store.schema import idempotency_records
from calsync.core.worker.maintenance import Maintenance
from tests.support import wait_until

RETENTION = Retention(batch=100, max_batches=5, dead_letters=0, cancelled_events=0)


def expired_records(db: Database, count: int) -> None:
    """``count`` idempotency records that expired already."""
    with db.write() as tx:
        for n in range(count):
            idempotency.record_success(tx, f"calendar:t:e{n}:a:create", job_id=f"j{n}", result={}, ttl_seconds=1)
    with db.write() as conn:
        conn.execute(idempotency_records.update().values(expires_at=dt.datetime.now(dt.UTC)))


def purged(table: str) -> float:
    """``calsync_housekeeping_rows_purged_total{table}`` in this process."""
    return REGISTRY.get_sample_value("calsync_housekeeping_rows_purged_total", {"table": table}) or 0.0


def maintenance(db: Database, redis_url: str, namespace: str, interval: float = 60) -> Maintenance:
    """A worker process's maintenance middleware on this test's database and namespace."""
    client: redis.Redis = redis.Redis.from_url(redis_url)
    watch = RedisOutage().of(redis_url)
    return Maintenance(
        db, client, RedisKeys(namespace), interval=interval, retention=RETENTION, watch=watch, requeue=lambda: 0
    )


def test_one_process_per_interval_runs_the_pass(db: Database, redis_url: str, namespace: str) -> None:
    expired_records(db, 7)
    first, second = maintenance(db, redis_url, namespace), maintenance(db, redis_url, namespace)
    before = purged("idempotency_records")

    report = first.run_once()
    assert report is not None and report.purged["idempotency_records"] == 7 and report.caught_up
    expired_records(db, 3)
    assert second.run_once() is None and first.run_once() is None  # the lease lasts the interval, for everyone
    assert purged("idempotency_records") - before == 7

    first.client.delete(first.keys.maintenance_lease())  # the interval is over
    again = second.run_once()
    assert again is not None and again.purged["idempotency_records"] == 3


def test_a_worker_process_runs_passes_on_its_own_thread(db: Database, redis_url: str, namespace: str) -> None:
    middleware = maintenance(db, redis_url, namespace, interval=0.05)
    broker: Any = dramatiq.get_broker()
    middleware.after_worker_boot(broker, None)  # type: ignore[arg-type]
    try:
        expired_records(db, 4)

        def empty() -> bool:
            with db.read() as conn:
                return conn.execute(select(func.count()).select_from(idempotency_records)).scalar_one() == 0

        wait_until(empty, what="the maintenance thread to purge the expired records")
    finally:
        middleware.after_worker_shutdown(broker, None)  # type: ignore[arg-type]
    assert middleware._thread is None


def test_the_pass_re_enqueues_what_the_broker_lost_under_the_same_lease(
    db: Database, redis_url: str, namespace: str
) -> None:
    calls: list[int] = []

    def requeue() -> int:
        calls.append(1)
        return 2

    client: redis.Redis = redis.Redis.from_url(redis_url)
    watch = RedisOutage().of(redis_url)
    first, second = (Maintenance(db, client, RedisKeys(namespace), interval=60, retention=RETENTION, watch=watch,
                                 requeue=requeue) for _ in range(2))  # fmt: skip
    assert first.run_once() is not None and calls == [1]
    assert second.run_once() is None and calls == [1]  # another process' pass of this interval: not again


def _passes(result: str) -> float:
    return REGISTRY.get_sample_value("calsync_housekeeping_passes_total", {"result": result}) or 0.0


def _timed() -> float:
    return REGISTRY.get_sample_value("calsync_housekeeping_pass_duration_seconds_count") or 0.0


def test_every_pass_is_timed_and_counted_by_how_it_ended(db: Database, redis_url: str, namespace: str) -> None:
    caught_up, failed, timed = _passes("caught_up"), _passes("failed"), _timed()
    assert maintenance(db, redis_url, namespace).run_once() is not None
    assert (_passes("caught_up"), _passes("failed"), _timed()) == (caught_up + 1, failed, timed + 1)

    def lost() -> int:
        raise ConnectionError("the broker went away")

    broken = maintenance(db, redis_url, f"{namespace}-other")  # its own lease: this interval's is taken
    broken.requeue = lost
    with pytest.raises(ConnectionError):
        broken.run_once()
    assert (_passes("caught_up"), _passes("failed"), _timed()) == (caught_up + 1, failed + 1, timed + 2)
