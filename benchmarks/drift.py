"""Drift sweeps at scale: an adapter's read-back of many accounts through its emulator, full and incremental.

    PYTHONPATH=. .venv/bin/python benchmarks/drift.py [--provider google] [--accounts 1000] [--events 100]
        [--user-events 0] [--threads 8] [--changed 0.1] [--rounds 2]

The emulator runs in a child process, seeded there with ``--accounts`` calendars of ``--events`` events each,
every one the body calsync's adapter writes (its marker included), plus ``--user-events`` of the user's own per
calendar. This process builds the adapter as the provider registry does and sweeps every account with
``read_back`` from ``--threads`` threads (a worker's thread pool), after one token grant per account (not
counted in the sweeps: an access token outlives many sweeps). Per round it times three sweeps:

- full: no cursor, every marked item listed (the first sweep, and what a 410 leads to);
- incremental, unchanged: each account's cursor from the full sweep, nothing changed (the goal: one request
  per account);
- incremental, edited: ``--changed`` of the accounts had one event edited by the user (the emulator's control
  route) first.

For each: wall seconds, accounts per second, requests the emulator answered (all, and not 2xx) per account,
items read, this process' CPU seconds (calsync and the client library) and the emulator's apart.

Providers: ``google`` (google-api-python-client + httplib2). Graph and EWS join ``--provider`` when their
adapters implement ``DriftReader``. What it measures is the adapter's read-back alone: the sweep job (traffic
control's gate, the comparison, the store) lives on the drift-core branch; once merged, time the whole
sweep with that job's entry point in place of ``read_back``. It is a benchmark, not a test: numbers depend
on the machine (docs/notes/drift.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
import multiprocessing
import os
import platform
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, cast

import psutil

from calsync.core.config.settings import Settings
from calsync.core.model.calendar import Account, EventState, Target
from calsync.core.model.drift import ReadBack, drift_reader
from calsync.providers.google.event_body import event_body, event_id_for
from calsync.providers.google.provider import GoogleProvider
from calsync.providers.registry import ProviderRegistry
from calsync_emulators import google
from calsync_emulators.control import GoogleControl
from calsync_emulators.server import RunningEmulator

PROVIDERS = ("google",)
TENANT = "bench-drift"


def _calendar(n: int) -> str:
    return f"user{n}@example.com"


def _event(m: int) -> EventState:
    start = dt.datetime(2026, 12, 1, 9) + dt.timedelta(hours=m)
    return EventState(id=f"evt{m}", tenant_id=TENANT, version=1, title=f"Meeting {m}", start=start,
                      end=start + dt.timedelta(hours=1), time_zone="Europe/Berlin", all_day=False,
                      location="Room 1", attendees=("bob@example.com", "carol@example.com"))  # fmt: skip


def _serve_google(queue: Any, accounts: int, events: int, user_events: int) -> None:
    """The child process: the Google emulator, seeded in place with what calsync wrote, until the benchmark ends."""
    app = google.create_app()
    for n in range(accounts):
        for m in range(events):
            event, target = _event(m), Target(event_id=f"evt{m}", account_id=f"acct{n}", tenant_id=TENANT)
            app.events.insert(_calendar(n), {**event_body(event, target), "id": event_id_for(target.sync_key)}, {})
        for m in range(user_events):
            own = {"summary": f"Own {m}", "start": {"date": "2026-12-01"}, "end": {"date": "2026-12-02"}}
            app.events.insert(_calendar(n), own, {})
    running = RunningEmulator(app)
    queue.put(running.url)
    threading.Event().wait()


@dataclass(frozen=True)
class Sweep:
    """One sweep of every account: what it cost and what it read."""

    name: str
    seconds: float
    requests: int
    failed: int
    items: int
    cpu_seconds: float
    emulator_cpu_seconds: float
    accounts: int

    def line(self) -> str:
        """The sweep as one line of the report."""
        return (f"  {self.name:<26} {self.seconds:7.2f} s  {self.accounts / self.seconds:7.0f} accounts/s"
                f"  {self.requests / self.accounts:5.2f} requests/account ({self.failed} not 2xx)"
                f"  {self.items:8d} items  CPU {self.cpu_seconds:6.2f} s,"
                f" emulator {self.emulator_cpu_seconds:6.2f} s")  # fmt: skip


@dataclass
class Bench:
    """The adapter, its accounts and emulator, and each account's cursor from the last sweep."""

    reader: Any
    accounts: list[Account]
    control: GoogleControl
    emulator: psutil.Process
    threads: int
    cursors: dict[str, str | None]

    def sweep(self, name: str, *, full: bool) -> Sweep:
        """``read_back`` of every account from the pool's threads (without a cursor when ``full``)."""
        before, cpu, emulator_cpu = self.control.request_count(), time.process_time(), _cpu(self.emulator)
        started = time.perf_counter()
        with ThreadPoolExecutor(self.threads) as pool:
            readings: list[ReadBack] = list(pool.map(lambda a: self._read(a, full), self.accounts))
        seconds = time.perf_counter() - started
        after = self.control.request_count()
        for account, reading in zip(self.accounts, readings, strict=True):
            self.cursors[account.id] = reading.cursor
            if reading.full is not full:
                raise RuntimeError(f"{account.id}: asked for {'a full' if full else 'an incremental'} listing")
        return Sweep(name, seconds, after["total"] - before["total"], after["failed"] - before["failed"],
                     sum(len(r.items) for r in readings), time.process_time() - cpu,
                     _cpu(self.emulator) - emulator_cpu, len(self.accounts))  # fmt: skip

    def _read(self, account: Account, full: bool) -> ReadBack:
        reading: ReadBack = self.reader.read_back(account, None if full else self.cursors[account.id])
        return reading


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def _google_bench(url: str, accounts: int, threads: int, emulator: psutil.Process) -> Bench:
    control = GoogleControl(url)
    provider = cast(GoogleProvider, ProviderRegistry(Settings(google_api_endpoint=control.api_endpoint)).get("google"))
    reader = drift_reader(provider)
    if reader is None:
        raise SystemExit("the google adapter cannot read back")
    every = [Account(id=f"acct{n}", tenant_id=TENANT, provider="google", address=_calendar(n),
                     credentials=control.user_credentials(f"1//bench-{n}", "client", "secret"))
             for n in range(accounts)]  # fmt: skip
    with ThreadPoolExecutor(threads) as pool:  # one token grant each, before anything is timed
        list(pool.map(provider.verify, every))
    return Bench(reader, every, control, emulator, threads, {})


def _edit(bench: Bench, share: float, round_number: int, events: int) -> int:
    """The user edits one event in ``share`` of the accounts; returns how many accounts changed."""
    step = max(1, round(1 / share)) if share > 0 else 0
    changed = bench.accounts[::step] if step else []
    for n, account in enumerate(changed):
        target = Target(event_id=f"evt{n % events}", account_id=account.id, tenant_id=TENANT)
        bench.control.edit_event(account.address, event_id_for(target.sync_key), summary=f"Edited {round_number}")
    return len(changed)


SERVE: dict[str, Callable[..., None]] = {"google": _serve_google}


def main() -> None:
    """Seed, then sweep full / incremental / incremental after edits per round, and print medians."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--provider", choices=PROVIDERS, default="google")
    parser.add_argument("--accounts", type=int, default=1000)
    parser.add_argument("--events", type=int, default=100, help="calsync's events per account")
    parser.add_argument("--user-events", type=int, default=0, help="the user's own events per account")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--changed", type=float, default=0.1, help="share of accounts with one user edit")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    spawn = multiprocessing.get_context("spawn")
    queue: Any = spawn.Queue()
    child = spawn.Process(target=SERVE[args.provider], args=(queue, args.accounts, args.events, args.user_events),
                          daemon=True)  # fmt: skip
    seeding = time.perf_counter()
    child.start()
    try:
        url = queue.get(timeout=3600)
        print(_configuration(args, time.perf_counter() - seeding), flush=True)
        bench = _google_bench(url, args.accounts, args.threads, psutil.Process(cast(int, child.pid)))
        results: dict[str, list[Sweep]] = {}
        for n in range(1, args.rounds + 1):
            sweeps = [bench.sweep("full", full=True), bench.sweep("incremental, unchanged", full=False)]
            edited = _edit(bench, args.changed, n, args.events)
            sweeps.append(bench.sweep(f"incremental, {edited} edited", full=False))
            print(f"round {n}:", flush=True)
            for sweep in sweeps:
                results.setdefault(sweep.name, []).append(sweep)
                print(sweep.line(), flush=True)
    finally:
        child.terminate()
        child.join(timeout=10)
    print(f"median of {args.rounds} rounds:")
    for runs in results.values():
        middle = sorted(runs, key=lambda s: s.seconds)[len(runs) // 2] if len(runs) % 2 else None
        print((middle or _median(runs)).line())


def _median(runs: list[Sweep]) -> Sweep:
    def mid(field: str) -> float:
        return statistics.median(float(getattr(s, field)) for s in runs)

    return Sweep(runs[0].name, mid("seconds"), round(mid("requests")), round(mid("failed")), round(mid("items")),
                 mid("cpu_seconds"), mid("emulator_cpu_seconds"), runs[0].accounts)  # fmt: skip


def _configuration(args: argparse.Namespace, seeded: float) -> str:
    return "\n".join([
        f"drift read-back, {args.provider}: {args.accounts} accounts x {args.events} events of calsync's "
        f"(+ {args.user_events} of the user's), {args.threads} threads, {args.rounds} rounds; seeded in {seeded:.0f} s",
        f"  {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {platform.python_implementation()} "
        f"{platform.python_version()}, {os.cpu_count()} CPUs, "
        f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}",
    ])  # fmt: skip


if __name__ == "__main__":
    main()
