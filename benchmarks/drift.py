"""Drift sweeps at scale: many accounts swept through an adapter's emulator, full and incremental.

    PYTHONPATH=. .venv/bin/python benchmarks/drift.py [--what read-back|sweep] [--provider google]
        [--accounts 1000] [--events 100] [--user-events 0] [--threads 8] [--changed 0.1] [--rounds 2]
        [--redis-url URL]

The emulator runs in a child process, seeded there with ``--accounts`` calendars of ``--events`` events each,
every one the body calsync's adapter writes (its marker included), plus ``--user-events`` of the user's own per
calendar. This process builds the adapter as the provider registry does and sweeps every account from
``--threads`` threads (a worker's thread pool), after one token grant per account (not counted in the sweeps:
an access token outlives many sweeps). ``--what``:

- ``read-back`` (default): the adapter's ``read_back`` alone, each account's cursor kept in memory;
- ``sweep``: the whole sweep job, ``run_sweep`` of core/drift/sweep.py (its own Redis and SQLite database,
  the targets synced as workers leave them: benchmarks/drift_sweep.py); it reads and saves each account's
  cursor in the database, so its full sweeps after the first are forced by expiring the sync tokens (a 410,
  then the full listing: two requests per account).

Per round it times three sweeps of every account:

- full: every marked item listed (the first sweep, and what a 410 leads to);
- incremental, unchanged: from the full sweep's cursors, nothing changed (the goal: one request per account);
- incremental, edited: ``--changed`` of the accounts had one event edited by the user (the emulator's control
  route) first.

For each: wall seconds, accounts per second, requests the emulator answered (all, and not 2xx) per account,
items read (``read-back``) or targets verified (``sweep``) and findings, this process' CPU seconds (calsync and
its client libraries) and the emulator's apart.

Providers: ``google`` (google-api-python-client + httplib2). Graph and EWS join ``--provider`` once their
adapters' ``DriftReader`` is merged (branch drift-mailbox): a seeding function per emulator in ``SERVE``. It is a
benchmark, not a test: numbers depend on the machine (docs/notes/drift.md).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import multiprocessing
import os
import platform
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import psutil

from benchmarks.drift_sweep import whole_sweeps
from benchmarks.support import add_redis_option
from calsync.core.config.settings import Settings
from calsync.core.model.calendar import Account, EventState, Target
from calsync.core.model.drift import ReadBack
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


def _serve_google(queue: Any, accounts: int, states: list[EventState], user_events: int) -> None:
    """The child process: the Google emulator, seeded in place with what calsync wrote, until the benchmark ends.

    Puts its URL and every seeded event's etag (per account, per event) on ``queue``."""
    app = google.create_app()
    etags: list[list[str]] = []
    for n in range(accounts):
        etags.append([])
        for event in states:
            target = Target(event_id=event.id, account_id=f"acct{n}", tenant_id=TENANT)
            event_id = event_id_for(target.sync_key)
            app.events.insert(_calendar(n), {**event_body(event, target), "id": event_id}, {})
            etags[-1].append(app.events.entry(_calendar(n), event_id).resource["etag"])
        for m in range(user_events):
            own = {"summary": f"Own {m}", "start": {"date": "2026-12-01"}, "end": {"date": "2026-12-02"}}
            app.events.insert(_calendar(n), own, {})
    running = RunningEmulator(app)
    queue.put((running.url, etags))
    threading.Event().wait()


@dataclass(frozen=True)
class Sweep:
    """One sweep of every account: what it cost and what it found."""

    name: str
    seconds: float
    requests: int
    failed: int
    items: int  # read back (--what read-back), or targets verified (--what sweep)
    findings: int
    cpu_seconds: float
    emulator_cpu_seconds: float
    accounts: int

    def line(self) -> str:
        """The sweep as one line of the report."""
        return (f"  {self.name:<26} {self.seconds:7.2f} s  {self.accounts / self.seconds:7.0f} accounts/s"
                f"  {self.requests / self.accounts:5.2f} requests/account ({self.failed} not 2xx)"
                f"  {self.items:7d} items {self.findings:4d} findings  CPU {self.cpu_seconds:6.2f} s,"
                f" emulator {self.emulator_cpu_seconds:6.2f} s")  # fmt: skip


#: One account's sweep: (items read or verified, findings, whether it was a full listing).
SweepOne = Callable[[Account, bool], tuple[int, int, bool]]


@dataclass
class Bench:
    """The accounts, the emulator, and how one account is swept."""

    sweep_one: SweepOne
    accounts: list[Account]
    control: GoogleControl
    emulator: psutil.Process
    threads: int

    def sweep(self, name: str, *, full: bool) -> Sweep:
        """Every account swept from the pool's threads (a full listing when ``full``)."""
        before, cpu, emulator_cpu = self.control.request_count(), time.process_time(), _cpu(self.emulator)
        started = time.perf_counter()
        with ThreadPoolExecutor(self.threads) as pool:
            swept = list(pool.map(lambda a: self.sweep_one(a, full), self.accounts))
        seconds = time.perf_counter() - started
        after = self.control.request_count()
        if any(was_full is not full for _, _, was_full in swept):
            raise RuntimeError(f"asked for {'full' if full else 'incremental'} listings, got another kind")
        return Sweep(name, seconds, after["total"] - before["total"], after["failed"] - before["failed"],
                     sum(n for n, _, _ in swept), sum(f for _, f, _ in swept), time.process_time() - cpu,
                     _cpu(self.emulator) - emulator_cpu, len(self.accounts))  # fmt: skip


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def _accounts(control: GoogleControl, count: int) -> list[Account]:
    return [Account(id=f"acct{n}", tenant_id=TENANT, provider="google", address=_calendar(n),
                    credentials=control.user_credentials(f"1//bench-{n}", "client", "secret"))
            for n in range(count)]  # fmt: skip


def _read_backs(provider: GoogleProvider) -> SweepOne:
    """``read_back`` alone, each account's cursor kept here (None for a full listing)."""
    cursors: dict[str, str | None] = {}

    def sweep_one(account: Account, full: bool) -> tuple[int, int, bool]:
        reading: ReadBack = provider.read_back(account, None if full else cursors[account.id])
        cursors[account.id] = reading.cursor
        return len(reading.items), 0, reading.full

    return sweep_one


def _edit(bench: Bench, share: float, round_number: int, states: list[EventState]) -> int:
    """The user edits one event in ``share`` of the accounts; returns how many accounts changed."""
    step = max(1, round(1 / share)) if share > 0 else 0
    changed = bench.accounts[::step] if step else []
    for n, account in enumerate(changed):
        target = Target(event_id=states[n % len(states)].id, account_id=account.id, tenant_id=TENANT)
        bench.control.edit_event(account.address, event_id_for(target.sync_key), summary=f"Edited {round_number}")
    return len(changed)


def _rounds(bench: Bench, args: argparse.Namespace, states: list[EventState], whole: bool) -> dict[str, list[Sweep]]:
    """Per round: a full sweep, an incremental one of an unchanged calendar, one after the user's edits.

    A whole sweep finds its cursor in the database: its full sweeps after the first are forced by expiring the
    emulator's sync tokens (the 410 path: two requests per account)."""
    results: dict[str, list[Sweep]] = {}
    for n in range(1, args.rounds + 1):
        if whole and n > 1:
            bench.control.control("POST", "config", {"sync_token_lifetime": 0})
        full = bench.sweep("full" if n == 1 or not whole else "full (after a 410)", full=True)
        bench.control.control("POST", "config", {"sync_token_lifetime": 86400})
        sweeps = [full, bench.sweep("incremental, unchanged", full=False)]
        edited = _edit(bench, args.changed, n, states)
        sweeps.append(bench.sweep(f"incremental, {edited} edited", full=False))
        print(f"round {n}:", flush=True)
        for sweep in sweeps:
            results.setdefault(sweep.name, []).append(sweep)
            print(sweep.line(), flush=True)
    return results


def _start(args: argparse.Namespace, states: list[EventState]) -> tuple[multiprocessing.Process, str, list[list[str]]]:
    """The seeded emulator in its child process: the process, its URL, the seeded etags."""
    spawn = multiprocessing.get_context("spawn")
    queue: Any = spawn.Queue()
    child = spawn.Process(target=SERVE[args.provider], args=(queue, args.accounts, states, args.user_events),
                          daemon=True)  # fmt: skip
    child.start()
    url, etags = queue.get(timeout=3600)
    return cast(multiprocessing.Process, child), url, etags


SERVE: dict[str, Callable[..., None]] = {"google": _serve_google}


def main() -> None:
    """Seed, then sweep full / incremental / incremental after edits per round, and print medians."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--provider", choices=PROVIDERS, default="google")
    parser.add_argument("--what", choices=("read-back", "sweep"), default="read-back",
                        help="the adapter's read_back alone, or the whole sweep job (core/drift/sweep.py)")  # fmt: skip
    parser.add_argument("--accounts", type=int, default=1000)
    parser.add_argument("--events", type=int, default=100, help="calsync's events per account")
    parser.add_argument("--user-events", type=int, default=0, help="the user's own events per account")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--changed", type=float, default=0.1, help="share of accounts with one user edit")
    parser.add_argument("--rounds", type=int, default=2)
    add_redis_option(parser)
    args = parser.parse_args()
    seeding = time.perf_counter()
    with contextlib.ExitStack() as stack:
        if args.what == "sweep":
            scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="calsync-bench-drift-")))
            whole = stack.enter_context(whole_sweeps(args, scratch, _start, TENANT, _calendar, _event))
            child, url, states, provider, sweep_one = (whole.child, whole.url, whole.states, whole.provider,
                                                       whole.sweep_one)  # fmt: skip
        else:
            states = [_event(m) for m in range(args.events)]
            child, url, _ = _start(args, states)
            provider = _google(GoogleControl(url))
            sweep_one = _read_backs(provider)
        stack.callback(child.join, 10)
        stack.callback(child.terminate)
        control = GoogleControl(url)
        accounts = _accounts(control, args.accounts)
        with ThreadPoolExecutor(args.threads) as pool:  # one token grant each, before anything is timed
            list(pool.map(provider.verify, accounts))
        print(_configuration(args, time.perf_counter() - seeding), flush=True)
        bench = Bench(sweep_one, accounts, control, psutil.Process(cast(int, child.pid)), args.threads)
        results = _rounds(bench, args, states, args.what == "sweep")
    print(f"median of {args.rounds} rounds:")
    for runs in results.values():
        middle = sorted(runs, key=lambda s: s.seconds)[len(runs) // 2] if len(runs) % 2 else None
        print((middle or _median(runs)).line())


def _google(control: GoogleControl) -> GoogleProvider:
    """The adapter as the provider registry builds it, pointed at the emulator."""
    return cast(GoogleProvider, ProviderRegistry(Settings(google_api_endpoint=control.api_endpoint)).get("google"))


def _median(runs: list[Sweep]) -> Sweep:
    def mid(field: str) -> float:
        return statistics.median(float(getattr(s, field)) for s in runs)

    return Sweep(runs[0].name, mid("seconds"), round(mid("requests")), round(mid("failed")), round(mid("items")),
                 round(mid("findings")), mid("cpu_seconds"), mid("emulator_cpu_seconds"), runs[0].accounts)  # fmt: skip


def _configuration(args: argparse.Namespace, seeded: float) -> str:
    return "\n".join([
        f"drift {args.what}, {args.provider}: {args.accounts} accounts x {args.events} events of calsync's "
        f"(+ {args.user_events} of the user's), {args.threads} threads, {args.rounds} rounds; seeded in {seeded:.0f} s",
        f"  {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {platform.python_implementation()} "
        f"{platform.python_version()}, {os.cpu_count()} CPUs, "
        f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}",
    ])  # fmt: skip


if __name__ == "__main__":
    main()
