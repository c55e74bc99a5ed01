"""How calsync's costs grow with its data: the same operations timed on PostgreSQL at 10 k, 100 k and 1 M events.

    PYTHONPATH=. .venv/bin/python benchmarks/scale.py [--sizes 10000,100000,1000000] [--repeat 7]
        [--samples 200] [--postgres-dsn DSN] [--redis-url URL]

A fresh schema of ``--postgres-dsn``, migrated by calsync, is filled in bulk to each size in turn
(benchmarks/scale_fill.py: 3 targets per event, 10,000 accounts, N/10 dead letters, 2N idempotency records),
then every operation runs in this process on calsync's own code, a warm-up first:

- ``submit_change`` for a new event in 1 and in 100 accounts (``Producer.submit``): p50 and p99 of ``--samples``;
- ``calsync status --json`` and ``calsync events show EVT [--tenant T] --json``: the click commands invoked in
  process on clients built once (their output discarded);
- one exporter scrape (the exporter's registry, rendered as Prometheus text);
- a reconcile pass with nothing overdue (``requeue_lost``, what workers run) and a housekeeping pass (``prune``);
- a DLQ page as the HTTP API reads it (a tenant's open dead letters by id): the first, and one after a cursor;
- the worker's cost per sync job: the jobs the size's ``submit_change`` samples enqueued (on both lanes), drained to
  the last by an in-process worker of 8 threads (memory provider), its CPU (this process's, over the drain) and
  PostgreSQL round trips (libpq's trace) per job.

Each is the median of ``--repeat`` runs. It prints a table with each size's figure and its ratio to the first
size's. The schema is dropped at the end, the Redis keys deleted (its own embedded Redis unless ``--redis-url``).
It is a benchmark, not a test: numbers depend on the machine (docs/notes/scale.md).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import functools
import io
import platform
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click
import dramatiq
import redis
from prometheus_client import generate_latest

from benchmarks.scale_fill import ACCOUNTS_PER_TENANT, TENANTS, fill
from benchmarks.support import (
    add_redis_option,
    postgresql_clients,
    traced_round_trips,
)
from calsync.actors.cli.changes import show
from calsync.actors.cli.shell import CliState
from calsync.actors.cli.status import status
from calsync.actors.worker import build_worker
from calsync.core.clients import Clients
from calsync.core.config.settings import Settings
from calsync.core.messaging.lanes import lanes_of
from calsync.core.observability.exporter import exporter_registry
from calsync.core.observability.pipeline_state import StateReader
from calsync.core.producer.reconcile import requeue_lost
from calsync.core.producer.submit import Producer
from calsync.core.store import dead_letters
from calsync.core.store.dead_letters import DeadLetterFilter
from calsync.core.store.pruning import Retention, prune
from calsync.providers.memory import MemoryProvider

DLQ_PAGE = 50  # the API's default page size
Figures = dict[str, float]  # operation -> milliseconds


def _ms(run: Callable[[], object]) -> float:
    began = time.perf_counter()
    run()
    return (time.perf_counter() - began) * 1000


def median_ms(run: Callable[[], object], repeat: int) -> float:
    """The median of ``repeat`` timed runs after one untimed warm-up, in milliseconds."""
    run()
    return statistics.median(_ms(run) for _ in range(repeat))


def percentiles_ms(run: Callable[[], object], samples: int) -> tuple[float, float]:
    """p50 and p99 of ``samples`` timed runs after one untimed warm-up, in milliseconds."""
    run()
    ordered = sorted(_ms(run) for _ in range(samples))
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def invoke(command: click.Command, state: CliState, **params: Any) -> None:
    """Run a ``calsync`` command in this process as its click callback, its output discarded."""
    with click.Context(command, obj=state) as ctx, contextlib.redirect_stdout(io.StringIO()):
        ctx.invoke(command, **params)


class Operations:
    """Every measured operation, on one set of clients."""

    def __init__(self, clients: Clients) -> None:
        self.clients = clients
        self.producer = Producer(clients)
        self.state = CliState()
        self.state.clients = clients  # what the command would connect on first use
        self.registry = exporter_registry(StateReader(clients))
        self.tenant = "tenant-1"
        self.open_dead_letters = DeadLetterFilter(status="open", tenant_id=self.tenant)
        self.accounts = [f"acc-{ACCOUNTS_PER_TENANT + n}" for n in range(ACCOUNTS_PER_TENANT)]  # tenant-1's

    def submit(self, accounts: int) -> None:
        """A new event in ``accounts`` accounts of one tenant."""
        start = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC)
        event = {"title": "Scale", "start": start.isoformat(), "end": (start + dt.timedelta(hours=1)).isoformat()}
        self.producer.submit(self.tenant, {"operation": "upsert", "accounts": self.accounts[:accounts], "event": event})

    def status(self) -> None:
        """``calsync status --json``."""
        invoke(status, self.state, as_json=True)

    def scrape(self) -> None:
        """One exporter scrape."""
        generate_latest(self.registry)

    def reconcile(self) -> None:
        """A reconcile pass; nothing is overdue, so nothing may be enqueued."""
        report = requeue_lost(self.clients)
        assert report.enqueued == 0, report.as_json()

    def housekeeping(self) -> None:
        """A housekeeping pass with the default retention."""
        prune(self.clients.db, Retention.of(self.clients.settings))

    def dlq_cursor(self) -> int | None:
        """A cursor halfway through the tenant's open dead letters."""
        with self.clients.db.read() as conn:
            found = dead_letters.find(conn, self.open_dead_letters)
        return found[len(found) // 2].id if found else None

    def dlq_page(self, after: int | None) -> None:
        """A page of a tenant's open dead letters after ``after``, as ``GET /v1/dead-letters`` reads it."""
        with self.clients.db.read() as conn:
            dead_letters.page(conn, self.open_dead_letters, after_id=after, limit=DLQ_PAGE + 1)

    def event_shown(self, *, with_tenant: bool) -> None:
        """``calsync events show EVT --json``, with or without ``--tenant``."""
        invoke(show, self.state, entity_id="evt-1", tenant=self.tenant if with_tenant else None, as_json=True)


def measure(ops: Operations, *, repeat: int, samples: int) -> Figures:
    """Every figure at the current size, in milliseconds."""
    figures: Figures = {}
    cursor = ops.dlq_cursor()
    for accounts in (1, 100):
        p50, p99 = percentiles_ms(
            functools.partial(ops.submit, accounts), samples if accounts == 1 else max(samples // 4, 10)
        )
        figures[f"submit_change {accounts} account(s) p50"] = p50
        figures[f"submit_change {accounts} account(s) p99"] = p99
    timed: dict[str, Callable[[], object]] = {
        "calsync status --json": ops.status,
        "one exporter scrape": ops.scrape,
        "reconcile pass, nothing overdue": ops.reconcile,
        "housekeeping pass": ops.housekeeping,
        "DLQ page, first": lambda: ops.dlq_page(None),
        "DLQ page, after a cursor": lambda: ops.dlq_page(cursor),
        "events show EVT --tenant T": lambda: ops.event_shown(with_tenant=True),
        "events show EVT (no tenant)": lambda: ops.event_shown(with_tenant=False),
    }
    figures.update({name: median_ms(run, repeat) for name, run in timed.items()})
    return figures


def worker_cost(settings: Settings, url: str, scratch: Path) -> Figures:
    """Drain the queue with an in-process worker of 8 threads: its CPU and PostgreSQL round trips per job."""
    client = redis.Redis.from_url(url)
    # Both lanes (a tenant's jobs past BULK_THRESHOLD a window take the bulk one) and their delay queues.
    lanes = lanes_of(settings).queues
    keys = [f"{settings.redis_namespace}:{queue}{suffix}.msgs" for queue in lanes for suffix in ("", ".DQ")]
    jobs = sum(int(client.hlen(key)) for key in keys)
    worker = build_worker(settings, providers={"memory": MemoryProvider()})
    try:
        with traced_round_trips(worker.clients.db.engine, scratch) as trips:
            worker.clients.broker.emit_after("process_boot")
            runner = dramatiq.Worker(worker.clients.broker, worker_threads=8, worker_timeout=100)
            cpu = time.process_time()
            runner.start()
            while sum(int(client.hlen(key)) for key in keys):  # every job done, its deferrals and retries too
                time.sleep(0.05)
            runner.stop()
            cpu = time.process_time() - cpu
    finally:
        worker.close()
        client.close()
    return {"worker CPU per sync job": cpu * 1000 / max(jobs, 1), "PostgreSQL round trips per sync job (count)":
            trips() / max(jobs, 1)}  # fmt: skip


def print_table(sizes: Sequence[int], results: Sequence[Figures]) -> None:
    """Each figure per size, and each size's ratio to the first."""
    base = sizes[0]
    head = [f"{size // 1000} k" for size in sizes] + [f"{size // 1000} k / {base // 1000} k" for size in sizes[1:]]
    print(f"| operation (ms, medians) | {' | '.join(head)} |")
    print(f"|---|{'---|' * len(head)}")
    for name in results[0]:
        values = [f"{figures[name]:.1f}" for figures in results]
        ratios = [f"{figures[name] / results[0][name]:.2f}" for figures in results[1:]]
        print(f"| {name} | {' | '.join(values + ratios)} |")


def main() -> None:
    """Fill, measure at each size, print the table, drop the schema."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,1000000", help="events at each step, ascending")
    parser.add_argument("--repeat", type=int, default=7, help="runs of each operation per size (median)")
    parser.add_argument("--samples", type=int, default=200, help="submit_change samples for 1 account per size")
    parser.add_argument("--postgres-dsn", default="postgresql://postgres@127.0.0.1:5432/test")
    add_redis_option(parser)
    args = parser.parse_args()
    sizes = sorted(int(size) for size in args.sizes.split(","))
    results: list[Figures] = []
    print(f"calsync scale, {dt.date.today()}, {platform.node()}, {platform.processor() or platform.machine()}, "
          f"{TENANTS * ACCOUNTS_PER_TENANT} accounts, sizes {sizes}")  # fmt: skip
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="calsync-bench-scale-")))
        # No drift sweeps: the worker's figures are the sync jobs' (benchmarks/drift.py measures the sweeps).
        clients = stack.enter_context(postgresql_clients("scale", args.postgres_dsn, args.redis_url, tmp,
                                                         drift_interval=0))  # fmt: skip
        settings, url = clients.settings, clients.broker_url
        ops = Operations(clients)
        have = 0
        for size in sizes:
            began = time.perf_counter()
            fill(clients.db, have=have, want=size)
            have = size
            print(f"  filled to {size} events in {time.perf_counter() - began:.0f} s", flush=True)
            if not results:  # a first round untimed: connections, compiled statements, the broker's scripts
                measure(ops, repeat=1, samples=10)
                worker_cost(settings, url, tmp / "trips-warm-up")
            results.append(measure(ops, repeat=args.repeat, samples=args.samples))
            results[-1].update(worker_cost(settings, url, tmp / f"trips-{size}"))
    print_table(sizes, results)


if __name__ == "__main__":
    main()
