"""Crash recovery of a real ``calsync worker``: SIGKILL mid-call, seconds until the job completes, effects.

    PYTHONPATH=. .venv/bin/python benchmarks/recovery.py [--trials 7] [--redis-url URL] [--set NAME=VALUE ...]

Each trial: one event, one memory account; the provider applies the create and then hangs (a delay
fault), the worker process group is SIGKILLed during that call, a fresh ``calsync worker`` is started
at once, and the time from the kill until the target is recorded as synced is measured. The
external effects are the events the memory provider holds for the account afterwards (must be 1).
Default settings unless ``--set`` overrides one (e.g. ``--set heartbeat_ttl=15``). Its own embedded
Redis unless ``--redis-url`` is given; every key it wrote is deleted at the end of each trial, and
the scratch directory with it. It is a benchmark, not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.support import add_redis_option, bench_redis, free_port, migrated_clients, namespace, remove_keys, seed
from calsync.core.config.settings import Settings, child_environment
from calsync.core.messaging.messages import sync_message
from calsync.core.store import targets
from calsync.core.store.targets import TargetKey
from calsync.providers.memory import MemoryProvider

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 300.0


def _start(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen([str(Path(sys.executable).with_name("calsync")), "worker"], env=env, cwd=ROOT,
                                stdout=out, stderr=out, start_new_session=True)  # fmt: skip


def _stop(proc: subprocess.Popen[bytes], sig: signal.Signals = signal.SIGTERM) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _wait(predicate: Any, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {TIMEOUT:g} s")
        time.sleep(0.1)


def trial(url: str, scratch: Path, overrides: dict[str, str]) -> tuple[float, int]:
    """One kill and recovery: seconds from the SIGKILL to the synced target, and the provider's events."""
    ns = namespace("recovery")
    data_dir = scratch / ns
    data_dir.mkdir(parents=True)
    settings = Settings(data_dir=data_dir, broker_url=url, database_url=f"sqlite:///{data_dir / 'calsync.sqlite3'}",
                        redis_namespace=ns, log_level="INFO",
                        **{"metrics_port": free_port(), **overrides})  # type: ignore[arg-type]  # fmt: skip
    provider = MemoryProvider(settings.effective_memory_provider_path)
    clients = migrated_clients(settings)
    workers: list[subprocess.Popen[bytes]] = []
    try:
        [payload] = seed(clients.db, 1)
        key = TargetKey(payload.tenant_id, payload.entity_id, payload.account_id)
        provider.add_fault(op="upsert", error=None, after=True, delay_ms=600_000, times=1)
        clients.broker.enqueue(sync_message(settings.queue, payload))
        env = child_environment(settings)
        workers.append(_start(env, data_dir / "worker.log"))
        _wait(lambda: any(c.effect == "created" for c in provider.calls()), "create at the provider")
        os.killpg(workers[0].pid, signal.SIGKILL)
        killed = time.monotonic()
        workers[0].wait()
        workers.append(_start(env, data_dir / "worker.log"))

        def synced() -> bool:
            with clients.db.read() as conn:
                row = targets.get_target(conn, key)
            return row is not None and row.status == "synced"

        _wait(synced, "synced target")
        return time.monotonic() - killed, len(provider.events(payload.account_id))
    finally:
        for proc in workers:
            _stop(proc)
        clients.close()
        remove_keys(url, ns)


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> None:
    """Run the trials and print the configuration, each trial, and min / median / p95 / max."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=7)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a setting to override")
    add_redis_option(parser)
    args = parser.parse_args()
    overrides = dict(item.split("=", 1) for item in args.set)
    shown = Settings(**overrides)  # type: ignore[arg-type]
    print(f"calsync worker {shown.worker_processes}x{shown.worker_threads}; LOCK_TTL {shown.lock_ttl:g} s, "
          f"HEARTBEAT_INTERVAL/TTL {shown.heartbeat_interval:g}/{shown.heartbeat_ttl:g} s, BROKER_HEARTBEAT_TIMEOUT "
          f"{shown.broker_heartbeat_timeout:g} s, maintenance chance {shown.broker_maintenance_chance:g}, "
          f"LOCK_RETRY_DELAY {shown.lock_retry_delay:g} s x {shown.lock_max_waits}; "
          f"overrides {overrides or 'none'}")  # fmt: skip
    seconds: list[float] = []
    effects: list[int] = []
    with tempfile.TemporaryDirectory(prefix="calsync-recovery-") as tmp, bench_redis(args.redis_url, Path(tmp)) as url:
        for n in range(args.trials):
            took, count = trial(url, Path(tmp), overrides)
            seconds.append(took)
            effects.append(count)
            print(f"trial {n + 1}: completed {took:.1f} s after the SIGKILL, external effects {count}", flush=True)
    print(f"min {min(seconds):.1f} s, median {statistics.median(seconds):.1f} s, p95 {_p95(seconds):.1f} s, "
          f"max {max(seconds):.1f} s; effects per trial {effects}")  # fmt: skip


if __name__ == "__main__":
    main()
