"""Tenant fairness: while one tenant has 10,000 jobs queued, seconds until another tenant's one change is synced.

    PYTHONPATH=. .venv/bin/python benchmarks/fairness.py [--jobs 10000] [--rounds 2] [--ongoing] [--redis-url URL]
        [--set NAME=VALUE ...]

Each side of a round, in a namespace and data dir of its own: a flooding tenant with 100 memory accounts
submits changes through ``Producer.submit`` (each fans out to all 100 accounts) until ``--jobs`` plus a
warm-up of 200 jobs are queued; then a real ``calsync worker`` (default shape, JSON logs at INFO, the
memory provider's SQLite file) starts, and once it has synced the warm-up, a second tenant submits one
change to one account. Measured: seconds from that submit until the memory provider holds the event,
and the flood jobs still queued at the submit and at that moment. The sides alternate: the bulk lane
at the given settings (default ``BULK_THRESHOLD`` 100 per 60 s), and the lane disabled
(``BULK_THRESHOLD`` 0, one FIFO queue). Its own embedded Redis unless ``--redis-url``; every key is
deleted after each side. With ``--ongoing`` the flooding tenant keeps submitting (one fan-out to its 100
accounts every 0.2 s, more than the worker drains) from the warm-up until the small change arrives.
It is a benchmark, not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from benchmarks.support import add_redis_option, bench_redis, free_port, migrated_clients, namespace, remove_keys
from calsync.core.config.settings import Settings, child_environment
from calsync.core.messaging.lanes import lanes_of
from calsync.core.producer.submit import Producer
from calsync.core.store import accounts
from calsync.providers.memory import MemoryProvider

ROOT = Path(__file__).resolve().parent.parent
FLOOD_ACCOUNTS = 100
WARM_UP = 200
TIMEOUT = 600.0
START = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC)


@dataclass(frozen=True)
class Side:
    """One side's figures."""

    name: str
    seconds: float  # from the small tenant's submit to its event at the provider
    queued_at_submit: int  # flood jobs still in the broker (ready + in flight) when it was submitted
    queued_at_sync: int  # ... and when its event reached the provider
    lanes_at_start: tuple[int, int]  # ready messages on the normal and bulk queues before the worker started


def _change(accounts_: list[str], title: str) -> dict[str, Any]:
    end = START + dt.timedelta(hours=1)
    return {"operation": "upsert", "accounts": accounts_,
            "event": {"title": title, "start": START.isoformat(), "end": end.isoformat()}}  # fmt: skip


def _queued(client: redis.Redis, settings: Settings) -> int:
    # Each queue's .msgs hash holds its ready and fetched-but-unacked bodies (core/observability/pipeline_state.py).
    return sum(int(client.hlen(f"{settings.redis_namespace}:{queue}.msgs")) for queue in lanes_of(settings).queues)


def _wait(predicate: Any, what: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not predicate():
        if proc.poll() is not None:
            raise RuntimeError(f"the worker exited while waiting for {what} (see its log)")
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {TIMEOUT:g} s")
        time.sleep(0.01)


def side(name: str, url: str, scratch: Path, jobs: int, overrides: dict[str, Any], *, ongoing: bool = False) -> Side:
    """One flood, one worker, one small change: its latency."""
    ns = namespace("fairness")
    data_dir = scratch / ns
    data_dir.mkdir(parents=True)
    settings = Settings(data_dir=data_dir, broker_url=url, database_url=f"sqlite:///{data_dir / 'calsync.sqlite3'}",
                        redis_namespace=ns, log_level="INFO", metrics_host="127.0.0.1", metrics_port=free_port(),
                        **overrides)  # fmt: skip
    provider = MemoryProvider(settings.effective_memory_provider_path)
    clients = migrated_clients(settings)
    client = redis.Redis.from_url(url)
    proc: subprocess.Popen[bytes] | None = None
    stop = threading.Event()
    feeder: threading.Thread | None = None
    try:
        with clients.db.write() as conn:
            flood = [accounts.add_account(conn, tenant_id="flood", provider="memory", address=f"f{n}@example.com",
                                          credentials=None, options={}).id for n in range(FLOOD_ACCOUNTS)]  # fmt: skip
            small = accounts.add_account(conn, tenant_id="small", provider="memory", address="s@example.com",
                                         credentials=None, options={}).id  # fmt: skip
        producer = Producer(clients)
        for n in range(-(-(jobs + WARM_UP) // FLOOD_ACCOUNTS)):
            producer.submit("flood", _change(flood, f"Flood {n}"))
        lanes = lanes_of(settings)
        at_start = (int(client.llen(f"{ns}:{lanes.normal}")), int(client.llen(f"{ns}:{lanes.bulk}")))
        total = _queued(client, settings)
        with open(data_dir / "worker.log", "ab") as out:
            proc = subprocess.Popen([str(Path(sys.executable).with_name("calsync")), "worker"],
                                    env=child_environment(settings), cwd=ROOT, stdout=out, stderr=out,
                                    start_new_session=True)  # fmt: skip
        _wait(lambda: _queued(client, settings) <= total - WARM_UP, "warm-up", proc)
        if ongoing:

            def keep_flooding() -> None:
                n = 0
                while not stop.wait(0.2):
                    producer.submit("flood", _change(flood, f"Ongoing {n}"))
                    n += 1

            feeder = threading.Thread(target=keep_flooding, daemon=True)
            feeder.start()
            time.sleep(5)  # the ongoing flood fills the lanes before the small change comes
        queued_at_submit = _queued(client, settings)
        began = time.perf_counter()
        producer.submit("small", _change([small], "Small"))
        _wait(lambda: provider.events(small), "small tenant's event at the provider", proc)
        took = time.perf_counter() - began
        stop.set()
        return Side(name, took, queued_at_submit, _queued(client, settings), at_start)
    finally:
        stop.set()
        if feeder is not None:
            feeder.join()
        if proc is not None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        client.close()
        clients.close()
        remove_keys(url, ns)


def main() -> None:
    """Alternate the two sides for every round; print each, then the medians and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=10_000, help="flood jobs queued when the small change comes")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--ongoing", action="store_true", help="the flooding tenant keeps submitting meanwhile")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a setting to override")
    add_redis_option(parser)
    args = parser.parse_args()
    overrides: dict[str, Any] = dict(item.split("=", 1) for item in args.set)
    shown = Settings(**overrides)
    print(f"calsync worker {shown.worker_processes}x{shown.worker_threads}, memory provider, SQLite; flood: "
          f"{args.jobs} + {WARM_UP} warm-up jobs of one tenant ({FLOOD_ACCOUNTS} accounts, changes fanned out to all); "
          f"lane: BULK_THRESHOLD {shown.bulk_threshold} per {shown.bulk_window:g} s, BULK_QUEUE "
          f"{shown.effective_bulk_queue}; ongoing flood {args.ongoing}; overrides {overrides or 'none'}",
          flush=True)  # fmt: skip
    results: dict[str, list[Side]] = {"bulk lane": [], "no lane": []}
    with tempfile.TemporaryDirectory(prefix="calsync-fairness-") as tmp, bench_redis(args.redis_url, Path(tmp)) as url:
        for n in range(args.rounds):
            for name, extra in (("bulk lane", {}), ("no lane", {"bulk_threshold": 0})):
                result = side(name, url, Path(tmp), args.jobs, {**overrides, **extra}, ongoing=args.ongoing)
                results[name].append(result)
                print(f"round {n + 1} {name:9}: {result.seconds:6.2f} s to the provider; flood queued "
                      f"{result.queued_at_submit} at the submit, {result.queued_at_sync} when it arrived; "
                      f"ready normal/bulk before the worker {result.lanes_at_start[0]}/{result.lanes_at_start[1]}",
                      flush=True)  # fmt: skip
    medians = {name: statistics.median(r.seconds for r in sides) for name, sides in results.items()}
    lane, none = medians["bulk lane"], medians["no lane"]
    print(f"median: bulk lane {lane:.2f} s, no lane {none:.2f} s (no lane / bulk lane = {none / lane:.0f}x); "
          "the target is <= 5 s")  # fmt: skip


if __name__ == "__main__":
    main()
