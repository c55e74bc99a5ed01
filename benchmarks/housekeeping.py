"""Housekeeping keeps up: table sizes under a steady job rate go flat once the retention windows have passed.

    PYTHONPATH=. .venv/bin/python benchmarks/housekeeping.py [--minutes 30] [--rate 200] [--retention 600]
        [--interval 10] [--report-every 60] [--database sqlite|postgresql] [--redis-url URL]

A worker (real Dramatiq threads, the deployed middleware stack with its maintenance thread, the memory
provider) and a producer in one process. The producer submits ``--rate`` jobs per second: every
event is created, then cancelled ``--cancel-after`` seconds later (two jobs, two idempotency
records, one event and one target row); ``--fail-share`` of the creates fail for good (dead letters,
discarded at each report as an operator would). ``IDEMPOTENCY_TTL``, ``CANCELLED_EVENT_RETENTION``
and ``DEAD_LETTER_RETENTION`` are all ``--retention``. Every ``--report-every`` seconds it prints the
size of each table, the queue depth and the rows purged so far; after the run, the sizes' spread
over the reports past the retention window (flat: close to 1.0), then the purge capacity: a backlog of
expired records is deleted by maintenance passes and their rate printed next to the job rate (the
target is >= 10x). It is a benchmark, not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import logging
import platform
import tempfile
import time
from pathlib import Path

import dramatiq
from prometheus_client import REGISTRY
from sqlalchemy import func, insert, select

from benchmarks.support import add_redis_option, bench_redis, namespace, private_database, remove_keys
from calsync.actors.worker import build_worker
from calsync.core.config.settings import Settings
from calsync.core.producer.submit import Producer
from calsync.core.runtime import Runtime
from calsync.core.store import accounts, dead_letters, migrate
from calsync.core.store.pruning import Retention, prune
from calsync.core.store.schema import dead_letters as dead_letters_table
from calsync.core.store.schema import event_targets, events, idempotency_records
from calsync.providers.memory import MemoryProvider

TABLES = {"idempotency": idempotency_records, "events": events, "targets": event_targets,
          "dead_letters": dead_letters_table}  # fmt: skip
TENANT = "bench"
TICK = 0.05


def parse() -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--rate", type=float, default=200, help="jobs per second (half creates, half cancels)")
    parser.add_argument("--retention", type=int, default=600,
                        help="seconds (at least 20): idempotency TTL and both retentions")  # fmt: skip
    parser.add_argument("--interval", type=float, default=10, help="MAINTENANCE_INTERVAL")
    parser.add_argument("--batch", type=int, default=2000, help="MAINTENANCE_BATCH")
    parser.add_argument("--max-batches", type=int, default=50, help="MAINTENANCE_MAX_BATCHES")
    parser.add_argument("--cancel-after", type=float, default=5, help="seconds from an event's create to its cancel")
    parser.add_argument("--fail-share", type=float, default=0.01, help="share of creates failing for good")
    parser.add_argument("--report-every", type=float, default=60)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--backlog", type=int, default=100_000, help="expired records for the capacity round")
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--postgres-dsn", default="postgresql://postgres@127.0.0.1:5432/test")
    add_redis_option(parser)
    return parser.parse_args()


def sizes(runtime: Runtime) -> dict[str, int]:
    """Rows of every table housekeeping prunes."""
    with runtime.db.read() as conn:
        return {name: int(conn.execute(select(func.count()).select_from(t)).scalar_one()) for name, t in TABLES.items()}


def purged() -> int:
    """Rows the maintenance passes of this process deleted so far."""
    return int(sum(sample.value for metric in REGISTRY.collect() if metric.name == "calsync_housekeeping_rows_purged"
                   for sample in metric.samples if sample.name.endswith("_total")))  # fmt: skip


class Load:
    """The producer side: creates at half the job rate, each event cancelled ``cancel_after`` seconds later."""

    def __init__(self, producer: Producer, account: str, args: argparse.Namespace) -> None:
        self.producer = producer
        self.account = account
        self.args = args
        self.created = 0.0  # creates owed so far (fractional)
        self.live: collections.deque[tuple[float, str]] = collections.deque()
        self.submitted = 0

    def step(self, started: float, now: float) -> None:
        """Submit what is due by ``now``."""
        due = (now - started) * self.args.rate / 2
        budget = max(1, round(self.args.rate * TICK * 2))  # a producer behind never starves the reports
        while self.created + 1 <= due and budget:
            budget -= 1
            self.created += 1
            every = round(1 / self.args.fail_share) if self.args.fail_share else 0
            doomed = bool(every) and int(self.created) % every == 0
            change = {"operation": "upsert", "accounts": [self.account], "event": {
                "title": "doomed" if doomed else "bench", "start": "2026-12-01T09:00:00",
                "end": "2026-12-01T10:00:00", "time_zone": "Europe/Berlin"}}  # fmt: skip
            self.live.append((now, self.producer.submit(TENANT, change).entity_id))
            self.submitted += 1
        while self.live and now - self.live[0][0] >= self.args.cancel_after:
            _, entity = self.live.popleft()
            self.producer.submit(TENANT, {"operation": "delete", "entity_id": entity})
            self.submitted += 1


def run_load(runtime: Runtime, load: Load, args: argparse.Namespace) -> list[tuple[float, dict[str, int]]]:
    """Drive the load for ``--minutes``, printing a report every ``--report-every`` seconds; returns the reports."""
    started = time.monotonic()
    end = started + args.minutes * 60
    next_report = started + args.report_every
    reports: list[tuple[float, dict[str, int]]] = []
    queue_key = runtime.keys.ready_queue(runtime.settings.queue)
    print(f"{'minute':>6} {'idempotency':>11} {'events':>7} {'targets':>7} {'dead_letters':>12} {'queue':>6} "
          f"{'submitted':>9} {'jobs/s':>6} {'purged':>8}")  # fmt: skip
    while (now := time.monotonic()) < end:
        load.step(started, now)
        if now >= next_report:
            next_report += args.report_every
            with runtime.db.write() as conn:  # the operator's part: dead letters are looked at and discarded
                dead_letters.discard_matching(conn, dead_letters.DeadLetterFilter(), note="benchmark")
            current = sizes(runtime)
            reports.append((now - started, current))
            print(f"{(now - started) / 60:6.1f} {current['idempotency']:11d} {current['events']:7d} "
                  f"{current['targets']:7d} {current['dead_letters']:12d} {runtime.redis.llen(queue_key):6d} "
                  f"{load.submitted:9d} {load.submitted / (now - started):6.1f} {purged():8d}", flush=True)  # fmt: skip
        time.sleep(TICK)
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


def capacity(runtime: Runtime, args: argparse.Namespace) -> None:
    """Delete a backlog of expired records with maintenance passes; print rows/s against the job rate."""
    expired = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
    rows = [{"key": f"calendar:{TENANT}:cap{n}:a:create", "job_id": f"j{n}", "outcome": "success", "result": {},
             "created_at": expired, "expires_at": expired} for n in range(args.backlog)]  # fmt: skip
    with runtime.db.write() as conn:
        for start in range(0, len(rows), 5000):
            conn.execute(insert(idempotency_records), rows[start : start + 5000])
    retention = Retention.of(runtime.settings)
    started, deleted, passes = time.monotonic(), 0, 0
    while deleted < args.backlog:  # the run's own expired records go too
        report = prune(runtime.db, retention, budget_seconds=args.interval * 0.8)
        deleted += report.purged.get("idempotency_records", 0)
        passes += 1
    elapsed = time.monotonic() - started
    measured = deleted / elapsed
    ceiling = args.batch * args.max_batches / args.interval
    print(
        f"capacity: {deleted} expired records in {passes} passes, {elapsed:.2f} s of passes: {measured:,.0f} rows/s "
        f"deleted while a pass runs; the configured ceiling BATCH x MAX_BATCHES / INTERVAL = {ceiling:,.0f} rows/s"
    )
    sustained = min(measured, ceiling)
    print(f"capacity / job rate = {sustained:,.0f} / {args.rate:g} = {sustained / args.rate:.1f}x (target >= 10x)")


def main() -> None:
    """Run the load, report, measure the purge capacity, clean up."""
    args = parse()
    logging.getLogger("calsync").setLevel(logging.ERROR)  # the doomed creates' dead letters are expected
    print(f"housekeeping benchmark: {args.minutes:g} min at {args.rate:g} jobs/s, retention {args.retention} s, "
          f"interval {args.interval:g} s, batch {args.batch} x {args.max_batches}, {args.database}, "
          f"{platform.node()} ({platform.processor() or platform.machine()})")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="calsync-housekeeping-") as scratch_dir:
        scratch = Path(scratch_dir)
        with bench_redis(args.redis_url, scratch) as redis_url, \
                private_database(args.database, args.postgres_dsn, scratch) as database_url:  # fmt: skip
            ns = namespace("housekeeping")
            settings = Settings(data_dir=scratch, broker_url=redis_url, redis_url=redis_url, database_url=database_url,
                                redis_namespace=ns, idempotency_ttl=args.retention,
                                cancelled_event_retention=args.retention, dead_letter_retention=args.retention,
                                webhook_retention=args.retention,
                                maintenance_interval=args.interval, maintenance_batch=args.batch,
                                maintenance_max_batches=args.max_batches, worker_threads=args.threads,
                                retry_schedule=(1,), delete_verify_delay=min(120, args.retention / 2))  # fmt: skip
            try:
                run(settings, args)
            finally:
                print(f"removed {remove_keys(redis_url, ns)} Redis keys of {ns}")


def run(settings: Settings, args: argparse.Namespace) -> None:
    """One benchmark run on prepared resources."""
    bootstrap = Runtime(settings, check_schema=False)
    migrate.upgrade(bootstrap.db)
    bootstrap.close()
    provider = MemoryProvider()
    if args.fail_share:
        provider.add_fault(error="invalid", op="upsert", title="^doomed$")
    app = build_worker(settings, providers={"memory": provider})
    runtime = app.runtime
    app.broker.emit_after("process_boot")  # as a worker process does: the middlewares set themselves up
    with runtime.db.write() as conn:
        account = accounts.add_account(conn, tenant_id=TENANT, provider="memory", address="bench@example.com",
                                       credentials=None, options={}).id  # fmt: skip
    worker = dramatiq.Worker(app.broker, worker_threads=args.threads, worker_timeout=100)
    worker.start()
    try:
        reports = run_load(runtime, Load(Producer(runtime), account, args), args)
    finally:
        worker.stop(timeout=30_000)
    settled_after = args.cancel_after + args.retention + 2 * args.interval + args.report_every
    flatness(reports, settled_after)
    capacity(runtime, args)
    app.close()


if __name__ == "__main__":
    main()
