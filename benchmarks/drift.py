"""Drift sweeps at scale: many accounts swept through each adapter's emulator, full and incremental.

    PYTHONPATH=.:emulators .venv/bin/python benchmarks/drift.py [--what read-back|sweep]
        [--provider google|graph|ews ...] [--accounts 1000] [--events 100] [--user-events 0] [--threads 8]
        [--changed 0.1] [--rounds 2] [--redis-url URL]

Each ``--provider`` (repeatable; default all three, one after the other, in one table) has its emulator run in a
child process, seeded there with ``--accounts`` calendars or mailboxes of ``--events`` events each, every one the
body calsync's adapter writes (its marker included), plus ``--user-events`` of the user's own per calendar
(benchmarks/drift_emulators.py). This process builds the adapter as the provider registry does (Google:
google-api-python-client over httplib2; Graph: httpx + msal; EWS: exchangelib) and sweeps every account from
``--threads`` threads (a worker's thread pool), after one ``verify`` per account (the token grant, or EWS's
connection and calendar folder: not counted in the sweeps, they outlive many sweeps). ``--what``:

- ``read-back`` (default): the adapter's ``read_back`` alone, each account's cursor kept in memory;
- ``sweep``: the whole sweep job, ``run_sweep`` of core/drift/sweep.py (its own Redis and SQLite database,
  the targets synced as workers leave them: benchmarks/drift_sweep.py); it reads and saves each account's
  cursor in the database, so its full sweeps after the first are forced by making the emulator refuse every
  cursor issued so far (Google's 410, Graph's 410 ``SyncStateNotFound``, EWS's ``ErrorInvalidSyncStateData``),
  then the full listing.

Per round it times three sweeps of every account:

- full: every marked item listed (the first sweep, and what a refused cursor leads to);
- incremental, unchanged: from the full sweep's cursors, nothing changed (the goal: one request per account);
- incremental, edited: ``--changed`` of the accounts had one event retitled by the user (the emulator's control
  route) first.

For each: wall seconds, accounts per second, requests the emulator answered (all, and not 2xx) per account,
items read (``read-back``) or targets verified (``sweep``) and findings, this process' CPU seconds (calsync and
its client libraries) and the emulator's apart. Each round prints as it ends; the medians end the run in one
table. It is a benchmark, not a test: numbers depend on the machine (docs/notes/drift.md).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import functools
import multiprocessing
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, cast

import psutil

from benchmarks.drift_emulators import EMULATED, TENANT, Emulated, Refs, Seeded, accounts
from benchmarks.drift_sweep import whole_sweeps
from benchmarks.support import add_redis_option
from calsync.core.config.settings import Settings
from calsync.core.model.calendar import Account, EventState
from calsync.core.model.drift import DriftReader
from calsync.providers.registry import ProviderRegistry
from calsync_emulators.control import EmulatorControl


def _event(m: int) -> EventState:
    start = dt.datetime(2026, 12, 1, 9) + dt.timedelta(hours=m)
    return EventState(id=f"evt{m}", tenant_id=TENANT, version=1, title=f"Meeting {m}", start=start,
                      end=start + dt.timedelta(hours=1), time_zone="Europe/Berlin", all_day=False,
                      location="Room 1", attendees=("bob@example.com", "carol@example.com"))  # fmt: skip


class _Adapter(DriftReader, Protocol):
    """A remote adapter: a drift reader with ``verify`` (one live call with the account's login)."""

    def verify(self, account: Account) -> None: ...


@dataclass(frozen=True)
class Sweep:
    """One sweep of every account: what it cost and what it found."""

    provider: str
    name: str
    seconds: float
    requests: int
    failed: int
    items: int  # read back (--what read-back), or targets verified (--what sweep)
    findings: int
    cpu_seconds: float
    emulator_cpu_seconds: float
    accounts: int

    HEADER = (f"  {'provider':<8} {'sweep':<26} {'wall':>9}  {'accounts/s':>10}  {'requests/account':>16}"
              f" {'not 2xx':>7}  {'items':>7} {'findings':>8}  {'CPU':>8} {'emulator CPU':>12}")  # fmt: skip

    def line(self) -> str:
        """The sweep as one row of the table."""
        return (f"  {self.provider:<8} {self.name:<26} {self.seconds:7.2f} s  {self.accounts / self.seconds:10.0f}"
                f"  {self.requests / self.accounts:16.2f} {self.failed:7d}  {self.items:7d} {self.findings:8d}"
                f"  {self.cpu_seconds:6.2f} s {self.emulator_cpu_seconds:10.2f} s")  # fmt: skip


#: One account's sweep: (items read or verified, findings, whether it was a full listing).
SweepOne = Callable[[Account, bool], tuple[int, int, bool]]


@dataclass
class Bench:
    """One provider's accounts and emulator, and how one account is swept."""

    provider: str
    emulated: Emulated
    sweep_one: SweepOne
    accounts: list[Account]
    control: EmulatorControl
    emulator: psutil.Process
    threads: int
    refs: Refs

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
        return Sweep(self.provider, name, seconds, after["total"] - before["total"],
                     after["failed"] - before["failed"], sum(n for n, _, _ in swept), sum(f for _, f, _ in swept),
                     time.process_time() - cpu, _cpu(self.emulator) - emulator_cpu, len(self.accounts))  # fmt: skip

    def edit(self, share: float, round_number: int) -> int:
        """The user retitles one event in ``share`` of the accounts; returns how many accounts changed."""
        step = max(1, round(1 / share)) if share > 0 else 0
        changed = range(0, len(self.accounts), step) if step else range(0)
        for k, n in enumerate(changed):
            external_id = self.refs[n][k % len(self.refs[n])][0]
            self.emulated.edit(self.control, n, external_id, f"Edited {round_number}")
        return len(changed)


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def _read_backs(provider: DriftReader) -> SweepOne:
    """``read_back`` alone, each account's cursor kept here (None for a full listing)."""
    cursors: dict[str, str | None] = {}

    def sweep_one(account: Account, full: bool) -> tuple[int, int, bool]:
        reading = provider.read_back(account, None if full else cursors[account.id])
        cursors[account.id] = reading.cursor
        return len(reading.items), 0, reading.full

    return sweep_one


def _rounds(bench: Bench, args: argparse.Namespace, whole: bool) -> dict[str, list[Sweep]]:
    """Per round: a full sweep, an incremental one of an unchanged calendar, one after the user's edits.

    A whole sweep finds its cursor in the database: its full sweeps after the first are forced by making the
    emulator refuse every cursor issued so far (two requests per account or more: the refused one, the listing)."""
    results: dict[str, list[Sweep]] = {}
    for n in range(1, args.rounds + 1):
        if whole and n > 1:
            bench.emulated.refuse_cursors(bench.control)
        full = bench.sweep("full" if n == 1 or not whole else "full (cursor refused)", full=True)
        bench.emulated.accept_cursors(bench.control)
        sweeps = [full, bench.sweep("incremental, unchanged", full=False)]
        edited = bench.edit(args.changed, n)
        sweeps.append(bench.sweep(f"incremental, {edited} edited", full=False))
        print(f"{bench.provider}, round {n}:", flush=True)
        for sweep in sweeps:
            results.setdefault(sweep.name, []).append(sweep)
            print(sweep.line(), flush=True)
    return results


def _start(args: argparse.Namespace, emulated: Emulated, states: list[EventState]) -> tuple[Any, Seeded]:
    """The seeded emulator in its child process: the process, and what it handed back."""
    spawn = multiprocessing.get_context("spawn")
    queue: Any = spawn.Queue()
    child = spawn.Process(target=emulated.serve, args=(queue, args.accounts, states, args.user_events), daemon=True)
    child.start()
    seeded: Seeded = queue.get(timeout=3600)
    return child, seeded


@dataclass(frozen=True)
class Parts:
    """One provider's seeded emulator, adapter, accounts and sweep of one account."""

    child: Any
    seeded: Seeded
    provider: _Adapter
    accounts: list[Account]
    sweep_one: SweepOne


@contextlib.contextmanager
def _parts(args: argparse.Namespace, emulated: Emulated) -> Iterator[Parts]:
    """The emulator seeded and the adapter built, for ``--what``; the child process ends with the block."""
    with contextlib.ExitStack() as stack:
        if args.what == "sweep":
            scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="calsync-bench-drift-")))
            start = functools.partial(_start, args, emulated)
            whole = stack.enter_context(whole_sweeps(args, scratch, emulated, start, _event))
            parts = Parts(whole.child, whole.seeded, cast(_Adapter, whole.provider), whole.accounts, whole.sweep_one)
        else:
            child, seeded = _start(args, emulated, [_event(m) for m in range(args.events)])
            registry = ProviderRegistry(Settings(**emulated.settings(seeded)))
            provider = cast(_Adapter, registry.get(emulated.adapter))
            made = accounts(emulated, emulated.control(seeded.url), args.accounts)
            parts = Parts(child, seeded, provider, made, _read_backs(provider))
        stack.callback(parts.child.join, 10)
        stack.callback(parts.child.terminate)
        stack.callback(cast(Any, parts.provider).close)
        yield parts


def _run(args: argparse.Namespace, name: str) -> list[Sweep]:
    """One provider's rounds; returns the median of each kind of sweep."""
    emulated = EMULATED[name]
    seeding = time.perf_counter()
    with _parts(args, emulated) as parts:
        with ThreadPoolExecutor(args.threads) as pool:  # one token grant or connection each, before anything is timed
            list(pool.map(parts.provider.verify, parts.accounts))
        print(f"{name}: seeded and verified in {time.perf_counter() - seeding:.0f} s", flush=True)
        bench = Bench(name, emulated, parts.sweep_one, parts.accounts, emulated.control(parts.seeded.url),
                      psutil.Process(parts.child.pid), args.threads, parts.seeded.refs)  # fmt: skip
        results = _rounds(bench, args, args.what == "sweep")
    return [_median(runs) for runs in results.values()]


def main() -> None:
    """Seed, then sweep full / incremental / incremental after edits per round, per provider; print medians."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--provider", choices=sorted(EMULATED), action="append",
                        help="google, graph or ews; repeat for several (default: all three)")  # fmt: skip
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
    args.provider = args.provider or ["google", "graph", "ews"]
    print(_configuration(args), flush=True)
    medians = [sweep for name in args.provider for sweep in _run(args, name)]
    print(f"median of {args.rounds} rounds:\n{Sweep.HEADER}")
    for sweep in medians:
        print(sweep.line())


def _median(runs: list[Sweep]) -> Sweep:
    """The middle run by wall time (odd count), else each figure's median."""
    if len(runs) % 2:
        return sorted(runs, key=lambda s: s.seconds)[len(runs) // 2]

    def mid(field: str) -> float:
        return statistics.median(float(getattr(s, field)) for s in runs)

    return replace(runs[0], seconds=mid("seconds"), requests=round(mid("requests")), failed=round(mid("failed")),
                   items=round(mid("items")), findings=round(mid("findings")), cpu_seconds=mid("cpu_seconds"),
                   emulator_cpu_seconds=mid("emulator_cpu_seconds"))  # fmt: skip


def _configuration(args: argparse.Namespace) -> str:
    return "\n".join([
        f"drift {args.what}, {', '.join(args.provider)}: {args.accounts} accounts x {args.events} events of "
        f"calsync's (+ {args.user_events} of the user's), {args.threads} threads, {args.rounds} rounds",
        f"  {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {platform.python_implementation()} "
        f"{platform.python_version()}, {os.cpu_count()} CPUs, "
        f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}",
    ])  # fmt: skip


if __name__ == "__main__":
    main()
