"""Housekeeping keeps up: table sizes under a steady job rate go flat once the retention windows have passed.

    PYTHONPATH=. .venv/bin/python benchmarks/housekeeping.py [--minutes 30] [--rate 200] [--retention 600]
        [--interval 10] [--report-every 60] [--processes 1] [--threads 8] [--producers 0]
        [--database sqlite|postgresql] [--redis-url URL]

As deployed: a ``calsync worker`` process (``--processes`` x ``--threads``, the deployed middleware
stack with its maintenance thread, metrics in Prometheus multiprocess files, JSON logs at INFO to a
file, the memory provider in its data dir's SQLite file); the producer (``Producer.submit``, the code
every door runs) in the benchmark's process, or ``--producers`` processes sharing the rate. It
submits ``--rate`` jobs per second: every event is created, then cancelled ``--cancel-after`` seconds
later (two jobs, two idempotency records, one event and one target row); ``--fail-share`` of the
creates fail for good (dead letters, discarded at each report as an operator would).
``IDEMPOTENCY_TTL`` and the dead-letter, cancelled-event and webhook retentions are all ``--retention``.
Every ``--report-every`` seconds it prints the size of each table, the queue depth (ready and in
flight on both lanes; delayed apart), the jobs submitted and completed (a final outcome, read from the
worker's metrics files) in the interval and per second, the rows the worker's passes purged so far,
the CPU (cores) of the worker and of everything else it started (producers, Redis; PostgreSQL's
server is not counted) and the load average. After the run: each table's spread over the reports past
the retention window (flat: close to 1.0); then, the worker stopped, the purge capacity: a backlog of
expired records deleted by maintenance passes, their rate printed next to the job rate (target >= 10x).
Figures and what limits the rate on a small machine: docs/notes/housekeeping.md. Its own embedded
Redis unless ``--redis-url`` is given; every key it wrote is deleted at the end.
It is a benchmark, not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import logging
import multiprocessing
import os
import platform
import subprocess
import tempfile
import time
from dataclasses import dataclass
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path
from threading import Event as EventType

import psutil
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector
from sqlalchemy import func, insert, select

from benchmarks.support import (
    add_redis_option,
    bench_redis,
    free_port,
    migrated_clients,
    namespace,
    private_database,
    remove_keys,
    start_worker,
    stop_group,
    tree_cpu,
)
from calsync.core.clients import Clients, connect
from calsync.core.config.settings import Settings, child_environment
from calsync.core.messaging.lanes import lanes_of
from calsync.core.model.vocabulary import Outcome
from calsync.core.producer.submit import Producer
from calsync.core.store import accounts, dead_letters
from calsync.core.store.pruning import Retention, prune
from calsync.core.store.schema import dead_letters as dead_letters_table
from calsync.core.store.schema import event_targets, events, idempotency_records
from calsync.providers.memory import MemoryProvider

TABLES = {"idempotency": idempotency_records, "events": events, "targets": event_targets,
          "dead_letters": dead_letters_table}  # fmt: skip
TENANT = "bench"
TICK = 0.05
BOOT_TIMEOUT = 60.0
PRODUCER_BOOT = 5.0  # seconds given to spawned producer processes to import and connect
FINAL = frozenset({Outcome.SUCCESS, Outcome.ALREADY_DONE, Outcome.STALE, Outcome.DEAD_LETTERED})


def parse() -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--rate", type=float, default=200, help="jobs per second (half creates, half cancels)")
    parser.add_argument("--retention", type=int, default=600,
                        help="seconds (at least 20): idempotency TTL and both retentions")  # fmt: skip
    parser.add_argument("--interval", type=float, default=10, help="MAINTENANCE_INTERVAL")
    parser.add_argument("--cancel-after", type=float, default=5, help="seconds from an event's create to its cancel")
    parser.add_argument("--fail-share", type=float, default=0.01, help="share of creates failing for good")
    parser.add_argument("--report-every", type=float, default=60)
    parser.add_argument("--processes", type=int, default=1, help="worker processes of the calsync worker")
    parser.add_argument("--threads", type=int, default=8, help="threads per worker process")
    parser.add_argument("--producers", type=int, default=0,
                        help="producer processes sharing the rate (0: the benchmark's own process)")  # fmt: skip
    parser.add_argument("--backlog", type=int, default=100_000, help="expired records for the capacity round")
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--postgres-dsn", default="postgresql://postgres@127.0.0.1:5432/test")
    add_redis_option(parser)
    return parser.parse_args()


def sizes(clients: Clients) -> dict[str, int]:
    """Rows of every table housekeeping prunes."""
    with clients.db.read() as conn:
        return {name: int(conn.execute(select(func.count()).select_from(t)).scalar_one()) for name, t in TABLES.items()}


@dataclass(frozen=True)
class WorkerCounts:
    """What the worker processes' metrics say so far: jobs completed (a final outcome) and rows purged."""

    completed: int
    purged: int


def worker_counts(settings: Settings) -> WorkerCounts:
    """Read the worker's Prometheus multiprocess files (what its ``/metrics`` serves)."""
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(settings.effective_metrics_dir))
    completed = purged = 0.0
    for metric in registry.collect():
        for sample in metric.samples:
            if sample.name == "calsync_jobs_total" and sample.labels.get("outcome") in FINAL:
                completed += sample.value
            elif sample.name == "calsync_housekeeping_rows_purged_total":
                purged += sample.value
    return WorkerCounts(int(completed), int(purged))


class Load:
    """The producer side: creates at half the job rate, each event cancelled ``cancel_after`` seconds later."""

    def __init__(self, producer: Producer, account: str, args: argparse.Namespace, rate: float) -> None:
        self.producer = producer
        self.account = account
        self.args = args
        self.rate = rate  # jobs per second of this producer
        self.created = 0.0  # creates owed so far (fractional)
        self.live: collections.deque[tuple[float, str]] = collections.deque()
        self.submitted = 0  # jobs the receipts named

    def step(self, started: float, now: float) -> None:
        """Submit what is due by ``now``."""
        due = (now - started) * self.rate / 2
        budget = max(1, round(self.rate * TICK * 2))  # a producer behind never starves the reports
        while self.created + 1 <= due and budget:
            budget -= 1
            self.created += 1
            every = round(1 / self.args.fail_share) if self.args.fail_share else 0
            doomed = bool(every) and int(self.created) % every == 0
            change = {"operation": "upsert", "accounts": [self.account], "event": {
                "title": "doomed" if doomed else "bench", "start": "2026-12-01T09:00:00",
                "end": "2026-12-01T10:00:00", "time_zone": "Europe/Berlin"}}  # fmt: skip
            receipt = self.producer.submit(TENANT, change)
            self.live.append((now, receipt.entity_id))
            self.submitted += len(receipt.job_ids)
        while self.live and now - self.live[0][0] >= self.args.cancel_after:
            _, entity = self.live.popleft()
            self.submitted += len(self.producer.submit(TENANT, {"operation": "delete", "entity_id": entity}).job_ids)


def produce(settings: Settings, account: str, args: argparse.Namespace, started: float,
            submitted: Synchronized[int], stop: EventType) -> None:  # fmt: skip
    """One producer process: its share of the rate from ``started`` (a monotonic time) until ``stop``."""
    logging.getLogger("calsync").setLevel(logging.ERROR)
    clients = connect(settings)  # migrated by run()
    load = Load(Producer(clients), account, args, args.rate / args.producers)
    try:
        while not stop.is_set():
            now = time.monotonic()
            load.step(started, now)
            submitted.value = load.submitted
            time.sleep(max(0.0, TICK - (time.monotonic() - now)))
    finally:
        clients.close()


class Producers:
    """``--producers`` processes submitting the load, or (0) a :class:`Load` stepped by the report loop."""

    def __init__(self, clients: Clients, account: str, args: argparse.Namespace, started: float) -> None:
        context = multiprocessing.get_context("spawn")
        self.stop = context.Event()
        self.local = None if args.producers else Load(Producer(clients), account, args, args.rate)
        self.counters = [context.Value("q", 0) for _ in range(args.producers)]
        self.processes = [context.Process(target=produce, args=(clients.settings, account, args, started, counter,
                                                                self.stop), daemon=True)
                          for counter in self.counters]  # fmt: skip
        for process in self.processes:
            process.start()

    def step(self, started: float, now: float) -> None:
        """Submit what is due (only when this process produces), and check the producer processes."""
        if self.local is not None:
            self.local.step(started, now)
        for process in self.processes:
            if process.exitcode is not None:
                raise RuntimeError(f"a producer process exited with {process.exitcode}")

    @property
    def submitted(self) -> int:
        """Jobs submitted so far, by every producer."""
        return self.local.submitted if self.local is not None else sum(int(c.value) for c in self.counters)

    def close(self) -> None:
        """Stop the producer processes."""
        self.stop.set()
        for process in self.processes:
            process.join(timeout=30)


def queue_depth(clients: Clients) -> tuple[int, int]:
    """Sync messages ready or in flight on both lanes, and delayed (retries, re-runs)."""
    queues = lanes_of(clients.settings).queues
    with clients.redis.pipeline(transaction=False) as pipe:
        for queue in queues:
            pipe.hlen(clients.keys.queue_messages(queue))
        for queue in queues:
            pipe.hlen(clients.keys.delayed_messages(queue))
        counts = [int(n) for n in pipe.execute()]
    return sum(counts[: len(queues)]), sum(counts[len(queues) :])


HEADER = (f"{'minute':>6} {'idempotency':>11} {'events':>7} {'targets':>7} {'dead_letters':>12} {'queue':>6} "
          f"{'delayed':>7} {'submitted':>9} {'sub/s':>6} {'completed':>9} {'done/s':>6} {'purged':>8} "
          f"{'cpu_worker':>10} {'cpu_other':>9} {'load':>5}")  # fmt: skip


class Meter:
    """Per report interval: jobs submitted and completed, and the CPU (in cores) of the worker and of the rest."""

    def __init__(self, worker: subprocess.Popen[bytes], started: float) -> None:
        self.worker = psutil.Process(worker.pid)
        self.everything = psutil.Process()  # this process and its children: producers, Redis, the worker
        self.last = (started, 0, 0, tree_cpu(self.worker), tree_cpu(self.everything))

    def interval(self, now: float, submitted: int, completed: int, purged: int) -> str:
        """The interval's report columns from ``submitted`` on."""
        worker_cpu, everything_cpu = tree_cpu(self.worker), tree_cpu(self.everything)
        then, last_submitted, last_completed, last_worker, last_everything = self.last
        span = now - then
        self.last = (now, submitted, completed, worker_cpu, everything_cpu)
        new, done = submitted - last_submitted, completed - last_completed
        cores = (worker_cpu - last_worker) / span
        other = (everything_cpu - last_everything) / span - cores
        return (f"{new:9d} {new / span:6.1f} {done:9d} {done / span:6.1f} {purged:8d} {cores:10.2f} {other:9.2f} "
                f"{os.getloadavg()[0]:5.1f}")  # fmt: skip


def run_load(clients: Clients, account: str, worker: subprocess.Popen[bytes],
             args: argparse.Namespace) -> list[tuple[float, dict[str, int]]]:  # fmt: skip
    """Drive the load for ``--minutes``, printing a report every ``--report-every`` seconds; returns the reports."""
    started = time.monotonic() + (PRODUCER_BOOT if args.producers else 0)  # spawned producers import first
    load = Producers(clients, account, args, started)
    try:
        while time.monotonic() < started:
            time.sleep(TICK)
        return _report_loop(clients, load, worker, args, started)
    finally:
        load.close()


def _report_loop(clients: Clients, load: Producers, worker: subprocess.Popen[bytes], args: argparse.Namespace,
                 started: float) -> list[tuple[float, dict[str, int]]]:  # fmt: skip
    end = started + args.minutes * 60
    next_report = started + args.report_every
    reports: list[tuple[float, dict[str, int]]] = []
    meter = Meter(worker, started)
    print(HEADER, flush=True)
    while (now := time.monotonic()) < end:
        load.step(started, now)
        if now >= next_report:
            if worker.poll() is not None:
                raise RuntimeError(f"the worker exited with {worker.returncode} (see its log)")
            next_report += args.report_every
            with clients.db.write() as conn:  # the operator's part: dead letters are looked at and discarded
                for record in dead_letters.find(conn, dead_letters.DeadLetterFilter()):
                    dead_letters.mark_discarded(conn, record.id, note="benchmark")
            current = sizes(clients)
            ready, delayed = queue_depth(clients)
            counts = worker_counts(clients.settings)
            reports.append((now - started, current))
            print(f"{(now - started) / 60:6.1f} {current['idempotency']:11d} {current['events']:7d} "
                  f"{current['targets']:7d} {current['dead_letters']:12d} {ready:6d} {delayed:7d} "
                  f"{meter.interval(now, load.submitted, counts.completed, counts.purged)}", flush=True)  # fmt: skip
        time.sleep(max(0.0, TICK - (time.monotonic() - now)))
    return reports


def flatness(reports: list[tuple[float, dict[str, int]]], settled_after: float) -> None:
    """Print, per table, the spread (max / min) of its size over the reports past the retention window."""
    settled = [r for at, r in reports if at >= settled_after]
    if len(settled) < 2:
        print(f"flatness: fewer than two reports after {settled_after:.0f} s; run longer")
        return
    for name in TABLES:
        values = [r[name] for r in settled]
        spread = max(values) / max(1, min(values))
        print(f"flatness {name:11s}: {len(values)} reports after {settled_after:.0f} s, min {min(values)}, "
              f"max {max(values)}, max/min {spread:.2f}")  # fmt: skip


def capacity(clients: Clients, args: argparse.Namespace) -> None:
    """Delete a backlog of expired records with maintenance passes; print rows/s against the job rate."""
    expired = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
    rows = [{"key": f"calendar:{TENANT}:cap{n}:a:create", "job_id": f"j{n}", "outcome": "success", "result": {},
             "created_at": expired, "expires_at": expired} for n in range(args.backlog)]  # fmt: skip
    with clients.db.write() as conn:
        for start in range(0, len(rows), 5000):
            conn.execute(insert(idempotency_records), rows[start : start + 5000])
    retention = Retention.of(clients.settings)
    started, deleted, passes = time.monotonic(), 0, 0
    while deleted < args.backlog:  # the run's own expired records go too
        report = prune(clients.db, retention, budget_seconds=args.interval * 0.8)
        deleted += report.purged.get("idempotency_records", 0)
        passes += 1
    elapsed = time.monotonic() - started
    measured = deleted / elapsed
    ceiling = Settings.maintenance_batch * Settings.maintenance_max_batches / args.interval
    print(
        f"capacity: {deleted} expired records in {passes} passes, {elapsed:.2f} s of passes: {measured:,.0f} rows/s "
        f"deleted while a pass runs; the configured ceiling BATCH x MAX_BATCHES / INTERVAL = {ceiling:,.0f} rows/s"
    )
    sustained = min(measured, ceiling)
    print(f"capacity / job rate = {sustained:,.0f} / {args.rate:g} = {sustained / args.rate:.1f}x (target >= 10x)")


def main() -> None:
    """Run the load, report, measure the purge capacity, clean up."""
    args = parse()
    logging.getLogger("calsync").setLevel(logging.ERROR)
    print(f"housekeeping benchmark: {args.minutes:g} min at {args.rate:g} jobs/s, retention {args.retention} s, "
          f"interval {args.interval:g} s, batch {Settings.maintenance_batch} x {Settings.maintenance_max_batches}, "
          f"{args.database}, "
          f"calsync worker {args.processes}x{args.threads}, producer: "
          f"{f'{args.producers} process(es)' if args.producers else 'this process'}, "
          f"{platform.node()} ({platform.processor() or platform.machine()}, {os.cpu_count()} CPUs)")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="calsync-housekeeping-") as scratch_dir:
        scratch = Path(scratch_dir)
        with bench_redis(args.redis_url, scratch) as redis_url, \
                private_database(args.database, args.postgres_dsn, scratch) as database_url:  # fmt: skip
            ns = namespace("housekeeping")
            settings = Settings(data_dir=scratch, broker_url=redis_url, redis_url=redis_url, database_url=database_url,
                                redis_namespace=ns, idempotency_ttl=args.retention,
                                cancelled_event_retention=args.retention, dead_letter_retention=args.retention,
                                webhook_retention=args.retention,
                                maintenance_interval=args.interval, worker_processes=args.processes,
                                worker_threads=args.threads, log_level="INFO", metrics_host="127.0.0.1",
                                metrics_port=free_port(), retry_schedule=(1,),
                                delete_verify_delay=min(120, args.retention / 2))  # fmt: skip
            try:
                run(settings, args, scratch / "worker.log")
            finally:
                print(f"removed {remove_keys(redis_url, ns)} Redis keys of {ns}")


def _booted(clients: Clients, worker: subprocess.Popen[bytes]) -> None:
    """Wait for the worker's heartbeat key: its consumers run."""
    deadline = time.monotonic() + BOOT_TIMEOUT
    while not clients.redis.scard(clients.keys.workers()):
        if worker.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the worker did not start (see its log)")
        time.sleep(0.1)


def run(settings: Settings, args: argparse.Namespace, log: Path) -> None:
    """One benchmark run on prepared resources."""
    clients = migrated_clients(settings)
    try:
        if args.fail_share:
            MemoryProvider(settings.effective_memory_provider_path).add_fault(error="invalid", op="upsert",
                                                                               title="^doomed$")  # fmt: skip
        with clients.db.write() as conn:
            account = accounts.add_account(conn, tenant_id=TENANT, provider="memory", address="bench@example.com",
                                           credentials=None, options={}).id  # fmt: skip
        worker = start_worker(child_environment(settings), log)
        try:
            _booted(clients, worker)
            reports = run_load(clients, account, worker, args)
        finally:
            stop_group(worker)
        settled_after = args.cancel_after + args.retention + 2 * args.interval + args.report_every
        flatness(reports, settled_after)
        capacity(clients, args)
    finally:
        clients.close()


if __name__ == "__main__":
    main()
