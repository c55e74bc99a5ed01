"""Throughput of the full calsync pipeline against the job written by hand and a bare Dramatiq no-op, in one run.

    .venv/bin/python benchmarks/pipeline.py [--jobs 5000] [--threads 8] [--rounds 3] [--database-url URL]

Every side uses the same Redis server, one worker process with the same number of threads, and the
same number of jobs, enqueued before the worker starts so only processing is timed. The calsync side
runs every middleware, the database (SQLite file by default), the per-target lock and the memory
provider in a SQLite file, as a deployed worker has it. Unless ``--database-url`` is given, the
seed's job written by hand (benchmarks/hand_written.py: no calsync code, its provider a SQLite file
too) runs beside it, and calsync over it is printed: the figure benchmarks/worker.py measures
deployed, here in one process, where a profiler sees it. The sides alternate for ``--rounds``
rounds, so a machine that slows down or speeds up during the run affects them alike; it prints each
round, then the median jobs/s of each side, the median of the rounds' ratios and Redis commands per
job (from INFO's total_commands_processed: its own embedded Redis, unless ``--redis-url`` names one;
every key it writes is under a ``bench-…`` namespace, deleted after each side).
It is a benchmark, not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import dramatiq
import redis
from dramatiq.brokers.redis import RedisBroker

from benchmarks.hand_written import HandWrittenJob
from benchmarks.support import (
    add_redis_option,
    bench_redis,
    finished_jobs,
    migrated_clients,
    namespace,
    remove_keys,
    seed,
)
from calsync.actors.worker import build_worker
from calsync.core.config.settings import Settings
from calsync.core.messaging.messages import sync_message
from calsync.providers.memory import MemoryProvider


@dataclass
class Measurement:
    """One side's result."""

    name: str
    jobs: int
    seconds: float
    redis_commands: int
    cpu_seconds: float  # of this whole process (all threads) while the side ran

    @property
    def rate(self) -> float:
        """Jobs per second."""
        return self.jobs / self.seconds


def _commands(client: redis.Redis) -> int:
    return int(client.info("stats")["total_commands_processed"])


def _timed(name: str, broker: dramatiq.Broker, client: redis.Redis, jobs: int, threads: int,
           finished: Callable[[], int]) -> Measurement:  # fmt: skip
    before = _commands(client)
    worker = dramatiq.Worker(broker, worker_threads=threads, worker_timeout=100)
    started, cpu = time.perf_counter(), time.process_time()
    worker.start()
    while finished() < jobs:
        time.sleep(0.005)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    worker.stop()
    return Measurement(name, jobs, elapsed, _commands(client) - before, cpu)


def bare(url: str, jobs: int, threads: int) -> Measurement:
    """Dramatiq with its default middleware and an actor that does nothing."""
    ns = namespace("bare")
    broker = RedisBroker(url=url, namespace=ns)
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
        broker.close()
        client.close()
        remove_keys(url, ns)


def calsync(url: str, jobs: int, threads: int, scratch: Path, database_url: str | None) -> Measurement:
    """The full pipeline: every middleware, the database, the lock and the memory provider's SQLite file."""
    settings = Settings(
        data_dir=scratch,
        broker_url=url,
        database_url=database_url or f"sqlite:///{scratch / 'bench.sqlite3'}",
        redis_namespace=namespace("calsync"),
        worker_threads=threads,
        log_level="WARNING",
    )
    migrated_clients(settings).close()
    worker = build_worker(settings, providers={"memory": MemoryProvider(scratch / "memory-provider.sqlite3")})
    broker = worker.clients.broker
    broker.emit_after("process_boot")
    payloads = seed(worker.clients.db, jobs)
    for payload in payloads:
        broker.enqueue(sync_message(settings.queue, payload))
    finished = finished_jobs(broker)
    try:
        return _timed("calsync pipeline", broker, worker.clients.redis, jobs, threads, finished)
    finally:
        worker.close()
        remove_keys(url, settings.redis_namespace)


def hand_written(url: str, jobs: int, threads: int, scratch: Path) -> Measurement:
    """Bare Dramatiq running the seed's job written by hand (benchmarks/hand_written.py), on a SQLite file."""
    path = scratch / "hand-written.sqlite3"
    settings = Settings(data_dir=scratch, broker_url=url, database_url=f"sqlite:///{path}", log_level="WARNING")
    setup = migrated_clients(settings)
    payloads = seed(setup.db, jobs)
    setup.close()
    ns = namespace("hand")
    broker = RedisBroker(url=url, namespace=ns)
    client = redis.Redis.from_url(url)
    job = HandWrittenJob(str(path), client, ns, str(scratch / "hand-written-provider.sqlite3"), 0.0)
    done = 0
    counted = threading.Lock()

    def sync(tenant: str, entity: str, account: str, version: int, key: str, job_id: str) -> None:
        nonlocal done
        job.run(tenant, entity, account, version, key, job_id)
        with counted:
            done += 1

    actor = dramatiq.actor(broker=broker, actor_name="sync", queue_name="calendar", max_retries=0)(sync)
    broker.emit_after("process_boot")
    for p in payloads:
        actor.send(p.tenant_id, p.entity_id, p.account_id, p.target_version, p.idempotency_key, p.job_id)
    try:
        return _timed("hand-written job", broker, client, jobs, threads, lambda: done)
    finally:
        broker.close()
        client.close()
        remove_keys(url, ns)


def main() -> None:
    """Run the sides, alternating, and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--database-url", help="default: a fresh SQLite file per round")
    add_redis_option(parser)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    rounds: list[dict[str, Measurement]] = []
    with tempfile.TemporaryDirectory(prefix="calsync-bench-") as tmp, bench_redis(args.redis_url, Path(tmp)) as url:
        scratch = Path(tmp)
        print(f"{args.jobs} jobs each, 1 process x {args.threads} threads, Redis at {url}", flush=True)
        for n in range(1, args.rounds + 1):
            round_dir = scratch / f"round-{n}"
            round_dir.mkdir()
            measured = {"bare": bare(url, args.jobs, args.threads)}
            if args.database_url is None:
                measured["hand"] = hand_written(url, args.jobs, args.threads, round_dir)
            measured["calsync"] = calsync(url, args.jobs, args.threads, round_dir, args.database_url)
            rounds.append(measured)
            print(f"round {n}:", flush=True)
            _print(measured)
    print(f"median of {len(rounds)} rounds:")
    for side, first in rounds[0].items():
        rate = statistics.median(r[side].rate for r in rounds)
        print(f"  {first.name:<22} {rate:8.0f} jobs/s")
    for over, meaning in _RATIOS:
        if over in rounds[0]:
            ratios = [r["calsync"].rate / r[over].rate for r in rounds]
            print(f"  calsync/{over}: {statistics.median(ratios):.2f} {meaning}"
                  f" (rounds: {', '.join(f'{x:.2f}' for x in ratios)})")  # fmt: skip


_RATIOS = (
    ("bare", "-- the target is >= 0.5"),
    ("hand", "-- the goal is >= 0.8 (deployed: benchmarks/worker.py)"),
)


def _print(measured: dict[str, Measurement]) -> None:
    for m in measured.values():
        per_job = m.redis_commands / m.jobs
        cpu = m.cpu_seconds / m.jobs * 1000
        print(f"  {m.name:<22} {m.rate:8.0f} jobs/s  ({m.seconds:6.2f} s, {per_job:5.1f} Redis commands/job,"
              f" {cpu:4.2f} ms CPU/job)")  # fmt: skip
    for over, _ in _RATIOS:
        if over in measured:
            print(f"  calsync/{over}: {measured['calsync'].rate / measured[over].rate:.2f}", flush=True)


if __name__ == "__main__":
    main()
