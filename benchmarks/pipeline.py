"""Throughput of the full calsync pipeline against a bare Dramatiq no-op actor, measured in one run.

    .venv/bin/python benchmarks/pipeline.py [--jobs 5000] [--threads 8] [--database-url URL]

Both sides use the same Redis server, one worker process with the same number of threads, and the
same number of jobs, enqueued before the worker starts so only processing is timed. The calsync side
runs every middleware, the database (SQLite file by default), the per-target lock and the memory
provider. It prints jobs/s for both, their ratio (the target is >= 0.5) and Redis commands per job
(from INFO's total_commands_processed, so keep other Redis clients quiet while it runs).
It is a benchmark, not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import dramatiq
import redis
from dramatiq.brokers.redis import RedisBroker

import actors
from core.domain import EventFields
from core.embedded_redis import EmbeddedRedis
from core.messages import sync_message
from core.middleware.lifecycle import JobLifecycle
from core.payload import new_payload
from core.runtime import Runtime
from core.settings import Settings
from core.store import accounts, events, migrate, targets
from core.store.targets import TargetKey
from providers.memory import MemoryProvider


@dataclass
class Measurement:
    """One side's result."""

    name: str
    jobs: int
    seconds: float
    redis_commands: int

    @property
    def rate(self) -> float:
        """Jobs per second."""
        return self.jobs / self.seconds


def _redis_url(scratch: Path) -> str:
    url = "redis://127.0.0.1:6379/0"
    try:
        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
        return url
    except redis.RedisError:
        return EmbeddedRedis(scratch).ensure()


def _commands(client: redis.Redis) -> int:
    return int(client.info("stats")["total_commands_processed"])


def _timed(name: str, broker: dramatiq.Broker, client: redis.Redis, jobs: int, threads: int,
           finished: Callable[[], int]) -> Measurement:  # fmt: skip
    before = _commands(client)
    worker = dramatiq.Worker(broker, worker_threads=threads, worker_timeout=100)
    started = time.perf_counter()
    worker.start()
    while finished() < jobs:
        time.sleep(0.005)
    elapsed = time.perf_counter() - started
    worker.stop()
    return Measurement(name, jobs, elapsed, _commands(client) - before)


def bare(url: str, jobs: int, threads: int) -> Measurement:
    """Dramatiq with its default middleware and an actor that does nothing."""
    broker = RedisBroker(url=url, namespace=f"bench-bare-{uuid.uuid4().hex[:8]}")
    done = 0
    lock = threading.Lock()

    def noop() -> None:
        nonlocal done
        with lock:
            done += 1

    actor = dramatiq.actor(broker=broker, actor_name="noop", queue_name="calendar", max_retries=0)(noop)
    broker.emit_after("process_boot")
    for _ in range(jobs):
        actor.send()
    client = redis.Redis.from_url(url)
    try:
        return _timed("bare Dramatiq no-op", broker, client, jobs, threads, lambda: done)
    finally:
        broker.flush_all()
        broker.close()


def calsync(url: str, jobs: int, threads: int, scratch: Path, database_url: str | None) -> Measurement:
    """The full pipeline: every middleware, the database, the lock and the memory provider."""
    settings = Settings(
        data_dir=scratch,
        broker_url=url,
        database_url=database_url or f"sqlite:///{scratch / 'bench.sqlite3'}",
        redis_namespace=f"bench-calsync-{uuid.uuid4().hex[:8]}",
        worker_threads=threads,
        log_level="WARNING",
    )
    bootstrap = Runtime(settings, check_schema=False)
    migrate.upgrade(bootstrap.db)
    bootstrap.close()
    runtime = Runtime(settings, role="worker", providers={"memory": MemoryProvider()})
    broker = runtime.broker
    actors.declare(broker, runtime)
    broker.emit_after("process_boot")
    start = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC)
    fields = EventFields(title="Benchmark", start=start, end=start + dt.timedelta(hours=1))
    with runtime.db.write() as conn:
        account = accounts.add_account(conn, tenant_id="bench", provider="memory", address="bench@example.com",
                                       credentials=None, options={}).id  # fmt: skip
    payloads = []
    with runtime.db.write() as conn:
        for n in range(jobs):
            entity = f"evt{n}"
            events.insert_event(conn, "bench", entity, fields, "none")
            targets.plan_target(conn, TargetKey("bench", entity, account), wanted="present", version=1,
                                due_at=dt.datetime.now(dt.UTC))  # fmt: skip
            payloads.append(new_payload(tenant_id="bench", entity_id=entity, account_id=account, operation="create",
                                        version=1, trace_id="bench"))  # fmt: skip
    for payload in payloads:
        broker.enqueue(sync_message(settings.queue, payload))
    done = 0
    lock = threading.Lock()

    def count(_ctx: object, _outcome: str, _duration: float) -> None:
        nonlocal done
        with lock:
            done += 1

    [lifecycle] = [m for m in broker.middleware if isinstance(m, JobLifecycle)]
    lifecycle.observers.append(count)

    def finished() -> int:
        return done

    try:
        return _timed("calsync pipeline", broker, runtime.redis, jobs, threads, finished)
    finally:
        broker.flush_all()
        keys = list(runtime.redis.scan_iter(match=f"{settings.redis_namespace}:*"))
        if keys:
            runtime.redis.delete(*keys)
        runtime.close()


def main() -> None:
    """Run both sides and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--database-url", help="default: a fresh SQLite file")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="calsync-bench-") as tmp:
        scratch = Path(tmp)
        url = _redis_url(scratch)
        results = [
            bare(url, args.jobs, args.threads),
            calsync(url, args.jobs, args.threads, scratch, args.database_url),
        ]
        EmbeddedRedis(scratch).stop()
    print(f"{args.jobs} jobs each, 1 process x {args.threads} threads, Redis at {url}")
    for m in results:
        per_job = m.redis_commands / m.jobs
        print(f"  {m.name:<22} {m.rate:8.0f} jobs/s  ({m.seconds:6.2f} s, {per_job:5.1f} Redis commands/job)")
    ratio = results[1].rate / results[0].rate
    print(f"  ratio calsync/bare: {ratio:.2f} (target >= 0.5)")


if __name__ == "__main__":
    main()
