"""Latency of ``submit_change`` for a change that fans out to 1, 10 and 100 accounts, measured in one run.

    PYTHONPATH=. .venv/bin/python benchmarks/fanout.py [--repeat 30] [--database sqlite|postgresql] [--redis-url URL]

Each sample creates a new event synced to N accounts of one tenant through ``Producer.submit`` (the
path of ``calsync.submit_change``): validation, the account check, one transaction with the event and
its N pending targets, then the dedup markers and N enqueues. The sizes alternate sample by sample,
so a machine that slows down affects them alike; it prints p50 and p90 per size, Redis commands per
account (its own embedded Redis unless ``--redis-url``; its keys are removed afterwards) and the ratio
p50(100) / p50(1) (the target is <= 10). Database: a fresh SQLite file, or a fresh schema of
``--postgres-dsn`` (dropped afterwards).
It is a benchmark, not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import statistics
import tempfile
import time
from pathlib import Path

import redis

from benchmarks.support import add_redis_option, bench_redis, migrated_clients, namespace, private_database, remove_keys
from calsync.core.config.settings import Settings
from calsync.core.producer.submit import Producer
from calsync.core.store import accounts

SIZES = (1, 10, 100)


def _commands(client: redis.Redis) -> int:
    return int(client.info("stats")["total_commands_processed"])


def main() -> None:
    """Submit alternating fan-out sizes and print the latencies."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=30, help="samples per size")
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--postgres-dsn", default="postgresql://postgres@127.0.0.1:5432/test")
    add_redis_option(parser)
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="calsync-bench-fanout-")))
        url = stack.enter_context(bench_redis(args.redis_url, tmp))
        database_url = stack.enter_context(private_database(args.database, args.postgres_dsn, tmp))
        ns = namespace("fanout")
        settings = Settings(data_dir=tmp, broker_url=url, redis_namespace=ns, log_level="WARNING",
                            database_url=database_url)  # fmt: skip
        clients = migrated_clients(settings)
        try:
            tenant = ns.replace("-", "_")
            with clients.db.write() as conn:
                ids = [accounts.add_account(conn, tenant_id=tenant, provider="memory", address=f"a{n}@example.com",
                                            credentials=None, options={}).id for n in range(max(SIZES))]  # fmt: skip
            producer = Producer(clients)
            start = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC)

            def submit(size: int) -> float:
                change = {"operation": "upsert", "accounts": ids[:size],
                          "event": {"title": "Fan-out", "start": start.isoformat(),
                                    "end": (start + dt.timedelta(hours=1)).isoformat()}}  # fmt: skip
                began = time.perf_counter()
                producer.submit(tenant, change)
                return time.perf_counter() - began

            for size in SIZES:  # warm-up: compiled statements, connections, the broker's scripts
                submit(size)
            samples: dict[int, list[float]] = {size: [] for size in SIZES}
            commands = {size: 0 for size in SIZES}
            for _ in range(args.repeat):
                for size in SIZES:
                    before = _commands(clients.redis)
                    samples[size].append(submit(size))
                    commands[size] += _commands(clients.redis) - before - 2  # minus the two INFO calls' own count
        finally:
            clients.close()
            remove_keys(url, ns)
    database = args.database
    origin = "explicit" if args.redis_url else "embedded, own"
    print(f"submit_change fan-out, {args.repeat} samples per size, database {database}, Redis {url} ({origin})")
    p50 = {}
    for size in SIZES:
        ordered = sorted(samples[size])
        p50[size] = statistics.median(ordered)
        p90 = ordered[int(len(ordered) * 0.9) - 1]
        per_account = commands[size] / args.repeat / size
        print(f"  {size:>3} accounts: p50 {p50[size] * 1000:7.2f} ms  p90 {p90 * 1000:7.2f} ms  "
              f"{per_account:4.1f} Redis commands/account")  # fmt: skip
    print(f"  p50(100)/p50(1): {p50[100] / p50[1]:.1f} -- the target is <= 10")


if __name__ == "__main__":
    main()
