"""Bursts of edits to one event through a real ``calsync worker``: provider writes and latency of the newest.

    PYTHONPATH=. .venv/bin/python benchmarks/burst.py [--rounds 3] [--edits 20] [--span 1.1]
        [--accounts 1,10] [--modes running,after] [--provider-delay-ms 0] [--redis-url URL] [--set NAME=VALUE ...]

Each round edits one event ``--edits`` times, evenly over ``--span`` seconds, through the producer
(``Producer.submit``, the code every door runs), the event fanned out to 1 or 10 memory accounts.
"running": the worker runs throughout. "after": the burst is queued while no worker runs, then a
fresh ``calsync worker`` is started. Printed per case: provider writes per account (upserts the
memory provider logged for the event after the burst began); seconds from the last edit (its submit
returning) until the newest version is at the provider in every account (for "after", also from the
worker's boot: its heartbeat key appears once its consumers run); the deliveries' outcomes from the
worker's log (stale and lock-busy ones never wrote); the longest pause between two edits' submits
returning (a pause longer than the window splits a burst in two). The events are created and synced
before the rounds, which wait out the coalesce window first, so the create is not part of a burst.
Default settings unless ``--set`` overrides one (e.g. ``--set coalesce_window=0`` for the uncoalesced
figures). Its own embedded Redis unless ``--redis-url`` is given; every key it wrote is deleted at
the end, with the scratch directory.
It is a benchmark, not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks.support import (
    add_redis_option,
    bench_redis,
    free_port,
    migrated_clients,
    namespace,
    remove_keys,
    start_worker,
    stop_group,
)
from calsync.core.config.settings import Settings, child_environment
from calsync.core.producer.submit import Producer
from calsync.core.store import accounts
from calsync.providers.memory import MemoryProvider

TENANT = "bench-burst"
TIMEOUT = 120.0


@dataclass(frozen=True)
class Round:
    """What one burst cost: writes per account, seconds to the newest version, outcomes of the deliveries."""

    writes: list[int]
    latency: float  # from the last edit until the newest version is at the provider in every account
    from_boot: float | None  # from the worker's boot, when its heartbeat key appears (the "after" case)
    outcomes: dict[str, int]
    pause: float  # the longest time between two edits' submits returning (a pause over the window splits the burst)


@dataclass(frozen=True)
class Burst:
    """The edits as submitted: when the first began, when each submit returned, the newest version."""

    began: float
    returned: list[float]
    version: int

    def longest_pause(self) -> float:
        """The longest time between two consecutive edits being saved and enqueued."""
        return max((b - a for a, b in zip(self.returned, self.returned[1:], strict=False)), default=0.0)


def _wait(predicate: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {TIMEOUT:g} s")
        time.sleep(0.01)


def _edit(title: str) -> dict[str, object]:
    return {"title": title, "start": "2026-12-01T09:00:00", "end": "2026-12-01T10:00:00", "time_zone": "Europe/Berlin"}


def _outcomes(log: Path, entity_id: str) -> collections.Counter[str]:
    """Outcomes of the sync deliveries for one event, from the worker's JSON log lines."""
    found: collections.Counter[str] = collections.Counter()
    for line in log.read_text().splitlines():
        if not line.startswith("{"):
            continue
        doc = json.loads(line)
        if doc.get("entity_id") == entity_id and "outcome" in doc:
            found[doc["outcome"]] += 1
    return found


class Bench:
    """One namespace, database and memory calendar; worker processes started and stopped as the cases need."""

    def __init__(self, url: str, scratch: Path, overrides: dict[str, str], max_accounts: int, delay_ms: int) -> None:
        self.ns = namespace("burst")
        data_dir = scratch / self.ns
        data_dir.mkdir(parents=True)
        self.log = data_dir / "worker.log"
        self.settings = Settings(data_dir=data_dir, broker_url=url, redis_url=url, redis_namespace=self.ns,
                                 database_url=f"sqlite:///{data_dir / 'calsync.sqlite3'}", log_level="INFO",
                                 metrics_port=free_port(), **overrides)  # type: ignore[arg-type]  # fmt: skip
        self.provider = MemoryProvider(self.settings.effective_memory_provider_path)
        if delay_ms:
            self.provider.add_fault(op="upsert", error=None, delay_ms=delay_ms)  # every write takes this long
        self.clients = migrated_clients(self.settings)
        self.producer = Producer(self.clients)
        self.env = child_environment(self.settings)
        with self.clients.db.write() as conn:
            self.accounts = [accounts.add_account(conn, tenant_id=TENANT, provider="memory", credentials=None,
                                                  address=f"burst{n}@example.com", options={}).id
                             for n in range(max_accounts)]  # fmt: skip
        self.worker: subprocess.Popen[bytes] | None = None

    def start_worker(self) -> None:
        """A fresh ``calsync worker`` process."""
        self.worker = start_worker(self.env, self.log)

    def _booted(self) -> bool:
        return bool(self.clients.redis.scard(self.clients.keys.workers()))

    def stop_worker(self) -> None:
        """SIGTERM the worker and wait for it (it drains what it holds) and for its heartbeat key to go."""
        if self.worker is not None:
            stop_group(self.worker)
            self.worker = None
            _wait(lambda: not self._booted(), "the stopped worker's heartbeat key to go")

    def create(self, entity_id: str, count: int) -> None:
        """Create the event in ``count`` accounts and wait until every one has it (a worker must run)."""
        self.producer.submit(TENANT, {"operation": "upsert", "entity_id": entity_id, "accounts": self.accounts[:count],
                                      "event": _edit("created")})  # fmt: skip
        _wait(lambda: self._at_version(entity_id, 1, count), f"create of {entity_id}")

    def _at_version(self, entity_id: str, version: int, count: int) -> bool:
        seen = {c.account_id for c in self.provider.calls() if c.entity_id == entity_id and c.version == version}
        return len(seen) == count

    def burst(self, entity_id: str, count: int, edits: int, span: float) -> Burst:
        """Submit the edits evenly over ``span`` seconds."""
        change = {"operation": "upsert", "entity_id": entity_id, "accounts": self.accounts[:count]}
        first = time.time()
        version = 0
        returned = []
        for n in range(edits):
            time.sleep(max(0.0, first + n * span / max(1, edits - 1) - time.time()))
            version = self.producer.submit(TENANT, {**change, "event": _edit(f"edit {n + 1}")}).version
            returned.append(time.time())
        return Burst(first, returned, version)

    def measure(self, entity_id: str, count: int, burst: Burst, *, after: bool) -> Round:
        """Wait for the newest version in every account and for every delivery of the burst, then count."""
        booted: list[float] = []
        version = burst.version

        def newest_everywhere() -> bool:
            if after and not booted and self._booted():
                booted.append(time.time())
            return self._at_version(entity_id, version, count)

        _wait(newest_everywhere, f"version {version} of {entity_id}")
        calls = [c for c in self.provider.calls()
                 if c.entity_id == entity_id and c.at >= burst.began and c.op == "upsert"]  # fmt: skip
        newest = max(c.at for c in calls if c.version == version)
        per_account = collections.Counter(c.account_id for c in calls)
        jobs = (version - 1) * count  # one job per edit and account
        final = ("success", "stale", "already_done", "dead_lettered")
        _wait(lambda: sum(_outcomes(self.log, entity_id)[o] for o in final) >= jobs + count, "every delivery")
        outcomes = _outcomes(self.log, entity_id)
        outcomes["success"] -= count  # the create's deliveries
        return Round([per_account[a] for a in self.accounts[:count]], newest - burst.returned[-1],
                     newest - booted[0] if booted else None, dict(outcomes), burst.longest_pause())  # fmt: skip

    def close(self, url: str) -> None:
        """Stop the worker, release the clients, delete every key of the namespace."""
        self.stop_worker()
        self.clients.close()
        remove_keys(url, self.ns)


def run_case(bench: Bench, mode: str, count: int, rounds: int, edits: int, span: float) -> list[Round]:
    """``rounds`` bursts of one case; the worker runs throughout ("running") or starts after each burst."""
    entities = [f"evt-{mode}-{count}-{n}" for n in range(rounds)]
    if bench.worker is None:
        bench.start_worker()
    for entity in entities:
        bench.create(entity, count)
    time.sleep(bench.settings.coalesce_window + 0.2)  # the creates' coalesce windows must not cover the bursts
    results = []
    for entity in entities:
        if mode == "after":
            bench.stop_worker()
        burst = bench.burst(entity, count, edits, span)
        if mode == "after":
            bench.start_worker()
        results.append(bench.measure(entity, count, burst, after=mode == "after"))
    return results


def _spread(values: list[float], unit: str = "") -> str:
    return f"min {min(values):.2f}{unit} median {statistics.median(values):.2f}{unit} max {max(values):.2f}{unit}"


def report(mode: str, count: int, results: list[Round]) -> None:
    """Print one case: writes per account, latencies, outcomes summed over its rounds."""
    writes = [w for r in results for w in r.writes]
    outcomes: collections.Counter[str] = collections.Counter()
    for r in results:
        outcomes.update(r.outcomes)
    line = (f"{mode:7} {count:2} account(s): writes per account max {max(writes)} "
            f"(per round {[max(r.writes) for r in results]}); newest visible after the last edit: "
            f"{_spread([r.latency for r in results], ' s')}")  # fmt: skip
    if results[0].from_boot is not None:
        line += f"; after the worker's boot: {_spread([r.from_boot or 0.0 for r in results], ' s')}"
    pauses = [r.pause for r in results]
    print(line + f"; outcomes {dict(sorted(outcomes.items()))}; longest pause between edits {max(pauses):.2f} s",
          flush=True)  # fmt: skip


def main() -> None:
    """Run the cases and print the configuration and each case's figures."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--edits", type=int, default=20)
    parser.add_argument("--span", type=float, default=1.1, help="seconds from the first edit to the last")
    parser.add_argument("--accounts", default="1,10", help="fan-out of each case, comma-separated")
    parser.add_argument("--modes", default="running,after", help="running: worker throughout; after: started after")
    parser.add_argument("--provider-delay-ms", type=int, default=0, help="how long each provider write takes")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a setting to override")
    add_redis_option(parser)
    args = parser.parse_args()
    overrides = dict(item.split("=", 1) for item in args.set)
    counts = [int(c) for c in args.accounts.split(",")]
    shown = Settings(**overrides)
    print(f"calsync worker {shown.worker_processes}x{shown.worker_threads}, memory provider, SQLite; "
          f"writes taking {args.provider_delay_ms} ms + the call; {args.edits} edits over {args.span:g} s, "
          f"{args.rounds} round(s) per case; COALESCE_WINDOW "
          f"{shown.coalesce_window:g} s, COALESCE_MAX_WAIT {shown.coalesce_max_wait:g} s, LOCK_RETRY_DELAY "
          f"{shown.lock_retry_delay:g} s; overrides {overrides or 'none'}", flush=True)  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="calsync-burst-") as tmp, bench_redis(args.redis_url, Path(tmp)) as url:
        bench = Bench(url, Path(tmp), overrides, max(counts), args.provider_delay_ms)
        try:
            for mode in args.modes.split(","):
                for count in counts:
                    report(mode, count, run_case(bench, mode, count, args.rounds, args.edits, args.span))
        finally:
            bench.close(url)


if __name__ == "__main__":
    main()
