"""What the console's live overview costs at scale: GET /console/overview/live timed against a filled PostgreSQL.

    PYTHONPATH=.:emulators .venv/bin/python benchmarks/console.py [--events 1000000] [--requests 200]
        [--queued 1000] [--postgres-dsn DSN] [--redis-url URL]

A fresh schema of ``--postgres-dsn``, migrated by calsync, is filled in bulk (benchmarks/scale_fill.py: 3 targets per
event, N/10 dead letters up to 100,000; the default 1,000,000 events hold 3,000,000 targets and 100,000 dead letters)
with a drift sweep state per account (swept an hour ago); ``--queued`` sync jobs wait on the normal lane; and
``calsync serve``'s application (the API with the console mounted) runs on uvicorn in a thread of this process,
signed in through the sign-in form as a viewer (a real session, looked up on each request). Then:

- each SQL statement of one overview reading, run again under ``EXPLAIN (ANALYZE, FORMAT JSON)``: its plan's scans
  (node, table, index), the rows they read, and its execution time;
- one reading in process (``read_overview``, no HTTP), the median of ``--requests``;
- GET /console/overview/live over one keep-alive connection, ``--requests`` times after a warm-up: p50 and p99.

The schema is dropped at the end and the Redis keys deleted (its own embedded Redis unless ``--redis-url``). It is a
benchmark, not a test: numbers depend on the machine (docs/notes/console.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text

from benchmarks.scale import median_ms, percentiles_ms
from benchmarks.scale_fill import fill
from benchmarks.support import add_redis_option, postgresql_clients
from calsync.actors.cli.serve import serving_app
from calsync.core.api.services import services_from_clients
from calsync.core.clients import Clients
from calsync.core.console.pages.overview import read_overview
from calsync.core.console.services import console_services_from_clients
from calsync.core.messaging.messages import sync_message
from calsync.core.model.payload import new_payload
from tests.api.live import serving
from tests.console.conftest import new_operator, sign_in
from tests.store.test_query_plans import recorded

SIZED = ("events", "event_targets", "dead_letters", "webhook_deliveries", "drift_state")


def load_average() -> str:
    """The machine's load average over 1, 5 and 15 minutes (the timings depend on it: 2 vCPUs, shared)."""
    return " ".join(f"{n:.1f}" for n in os.getloadavg())


# Every account swept an hour ago, its next sweep due in an hour (nothing overdue): the drift statements of a reading
# join a row per account, as they would once sweeps have run (benchmarks/scale_fill.py writes no sweep state).
_SWEPT = """
INSERT INTO drift_state (account_id, cursor, swept_at, next_sweep_at, failures)
SELECT id, NULL, now() - interval '1 hour', now() + interval '1 hour', 0 FROM provider_accounts
"""


def sweep_state(clients: Clients) -> None:
    """A drift sweep state row per account, analyzed."""
    with clients.db.write() as conn:
        conn.execute(text(_SWEPT))
    with clients.db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE drift_state"))


def enqueue(clients: Clients, jobs: int) -> None:
    """``jobs`` sync jobs waiting on the normal lane: the queue reading has a head message to date."""
    for n in range(jobs):
        payload = new_payload(tenant_id="tenant-1", entity_id=f"evt-{n}", account_id="acc-100", operation="update",
                              version=2, trace_id="bench-console")  # fmt: skip
        clients.broker.enqueue(sync_message(clients.settings.queue, payload))


def sizes(clients: Clients) -> dict[str, int]:
    """The filled tables' sizes (counted once, outside the timings)."""
    with clients.db.read() as conn:
        return {table: int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()) for table in SIZED}


def _scans(node: dict[str, Any]) -> Iterator[str]:
    if "Relation Name" in node or "Index Name" in node:
        where = node.get("Index Name") or "no index"
        yield f"{node['Node Type']} {node.get('Relation Name', '')} ({where}): {node.get('Actual Rows', 0)} rows"
    for child in node.get("Plans", ()):
        yield from _scans(child)


def explained(clients: Clients) -> list[tuple[str, list[str], float]]:
    """Each statement of one overview reading: its text, its plan's scans and its execution time (ms)."""
    console = console_services_from_clients(clients)
    with recorded(clients.db) as sent:
        read_overview(console)
    plans = []
    with clients.db.engine.connect() as conn:
        for statement, parameters in sent:
            [[result]] = conn.exec_driver_sql(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}", parameters).all()
            plans.append((" ".join(statement.split()), list(_scans(result[0]["Plan"])), result[0]["Execution Time"]))
    return plans


def timed_requests(client: httpx.Client, requests: int) -> tuple[float, float]:
    """p50 and p99 of GET /console/overview/live (each answer checked), in milliseconds."""

    def one() -> None:
        answer = client.get("/overview/live")
        assert answer.status_code == 200 and 'id="queues"' in answer.text, answer.status_code

    return percentiles_ms(one, requests)


def run(
    clients: Clients, *, events: int, requests: int, queued: int, out: Callable[[str], None] = print
) -> dict[str, float]:
    """Fill, explain, time; print as it goes; returns the figures (milliseconds)."""
    began = time.perf_counter()
    fill(clients.db, have=0, want=events)
    sweep_state(clients)
    enqueue(clients, queued)
    out(f"filled in {time.perf_counter() - began:.0f} s: {sizes(clients)}, {queued} jobs queued")
    out("\nstatements of one reading, EXPLAIN ANALYZE:")
    for statement, scans, ms in explained(clients):
        out(f"- {ms:.2f} ms  {statement[:160]}")
        for scan in scans:
            out(f"    {scan}")
    load_before = load_average()
    reading = console_services_from_clients(clients)
    in_process = median_ms(lambda: read_overview(reading), requests)
    with serving(services_from_clients(clients), serving_app(clients)) as live:
        _name, key = new_operator(live, "viewer", name="bench-viewer@example.test")
        http = sign_in(live, key)  # a real session: its lookup is part of each request's cost
        try:
            p50, p99 = timed_requests(http, requests)
        finally:
            http.close()
    figures = {"read_overview in process, median": in_process, "GET /console/overview/live p50": p50,
               "GET /console/overview/live p99": p99}  # fmt: skip
    out(f"\n{requests} requests, milliseconds (load average before the timings: {load_before}):")
    for name, ms in figures.items():
        out(f"  {name}: {ms:.1f}")
    return figures


def main() -> None:
    """Fill, explain, time, print; then drop the schema and the keys."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000, help="events filled (3 targets each)")
    parser.add_argument("--requests", type=int, default=200, help="timed requests (p50, p99)")
    parser.add_argument("--queued", type=int, default=1000, help="sync jobs waiting on the normal lane")
    parser.add_argument("--postgres-dsn", default="postgresql://postgres@127.0.0.1:5432/test")
    add_redis_option(parser)
    args = parser.parse_args()
    print(f"calsync console overview, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
          f"{os.cpu_count()} CPUs, load average {load_average()}")  # fmt: skip
    with (
        tempfile.TemporaryDirectory(prefix="calsync-bench-console-") as tmp,
        postgresql_clients("console", args.postgres_dsn, args.redis_url, Path(tmp)) as clients,
    ):
        run(clients, events=args.events, requests=args.requests, queued=args.queued)
    print(f"load average at the end: {load_average()}")


if __name__ == "__main__":
    main()
