"""Each adapter through its emulator in deployed ``calsync worker`` processes, against a bare ``dramatiq`` worker.

    PYTHONPATH=. .venv/bin/python benchmarks/adapters.py [--jobs 2000] [--rounds 3] [--shape 1x8]
        [--adapters memory,google,exchange,graph] [--latency-ms 0] [--compare PATH] [--redis-url URL]

The sides of benchmarks/worker.py (a ``calsync worker`` as deployed: metrics, heartbeats, JSON logs;
the bare side a no-op actor with Dramatiq's default middleware), once per adapter: memory (the data
dir's SQLite file), google (google-api-python-client + httplib2 against the Google emulator),
exchange (exchangelib against the EWS emulator, Basic auth, impersonation) and graph (httpx + msal
over https against the Exchange emulator's Graph front, app credentials, as many mailbox slots as
threads). Each calsync side syncs ``--jobs`` new events (a create each) of one account, queued
before the worker starts; the drain rate is measured from 90 % to 10 % of them left. Traffic
control's per-account limits are lifted for that one account (concurrency = threads, no rate): the
gate runs, never holds. The emulators run in one child process: its CPU over the same window is reported
apart (per job), so "CPU ms/job" is calsync and its client libraries only. Each line also counts, over
the window, the workers' Redis commands per job and the requests the emulator got per job (all, and
those not answered 2xx). The Graph emulator's per-mailbox limit is raised to the threads too: at its
default (Graph's 4) the fifth request in flight gets a 429 with Retry-After, which blocks the account
for a second. They keep their items across rounds, as a real mailbox does. The sides alternate per
round; it prints each round, then the medians, each adapter's ratio to bare and the targets (google >=
0.35, exchange >= 0.15).
``--latency-ms N`` makes every request to an emulator (a delay-only fault rule on each) and every memory
provider write answer after N ms: a realistic provider's latency, where threads wait instead of running.
``--compare PATH`` also runs each adapter from another checkout (before/after in one run). It is a
benchmark, not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import statistics
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from benchmarks.drain import Drain, Shape
from benchmarks.support import add_redis_option, bench_redis
from benchmarks.worker import Adapter, bare, calsync
from calsync.core.traffic.settings import ACCOUNT_CONCURRENCY, ACCOUNT_RATE, PROVIDER_RATE
from calsync_emulators import ews, google, graph
from calsync_emulators.control import EmulatorControl, EwsControl, GoogleControl, GraphControl
from calsync_emulators.server import RunningEmulator

ADAPTERS = ("memory", "google", "exchange", "graph")
TARGETS = {"google": 0.35, "exchange": 0.15}
_SERVICE_ACCOUNT = {"username": "svc@example.com", "password": "svc-password"}  # the EWS emulator's default


def _serve(queue: Any, scratch: str) -> None:
    """The child process: every emulator on its own port, until the benchmark ends."""
    tls = graph.self_signed(Path(scratch))
    servers = [RunningEmulator(google.create_app()), RunningEmulator(ews.create_app()),
               RunningEmulator(graph.create_app(), tls=tls.context)]  # fmt: skip
    queue.put(([s.url for s in servers], str(tls.ca_file)))
    threading.Event().wait()


def _served(control: EmulatorControl) -> Callable[[], tuple[int, int]]:
    def counts() -> tuple[int, int]:
        answer = control.request_count()
        return answer["total"], answer["failed"]

    return counts


def _adapters(names: list[str], urls: list[str], ca_file: str, emulator: psutil.Process,
              threads: int, latency_ms: int) -> dict[str, Adapter]:  # fmt: skip
    google_control, ews_control, graph_control = GoogleControl(urls[0]), EwsControl(urls[1]), GraphControl(urls[2])
    if latency_ms:
        for control in (google_control, ews_control, graph_control):
            control.add_fault(delay_ms=latency_ms)  # every request answers after it, otherwise as usual
    graph_control.configure(mailbox_concurrency=threads)  # as many as the limiter's slots: no 429 holds
    # One account per side: traffic control's per-account politeness (4 calls at a time, 5-8 per second by
    # default) would measure the deferrals, not the adapter. Its gate still runs (admit and settle per call).
    unbound = {
        "account_concurrency": {**ACCOUNT_CONCURRENCY, **dict.fromkeys(ADAPTERS[1:], threads)},
        "account_rate": dict.fromkeys(ACCOUNT_RATE, 0.0),
        "provider_rate": dict.fromkeys(PROVIDER_RATE, 0.0),
    }
    every = {
        "memory": Adapter(),
        "google": Adapter("google", {"google_api_endpoint": google_control.api_endpoint, **unbound},
                          "ceo@example.com", google_control.user_credentials("1//bench", "client", "secret"),
                          emulator=emulator, served=_served(google_control)),
        "exchange": Adapter("exchange", unbound, "cfo@example.com", _SERVICE_ACCOUNT,
                            {"server_url": ews_control.server_url, "auth_type": "basic",
                             "access_type": "impersonation"}, emulator, _served(ews_control)),
        # As many Graph slots as threads: the one mailbox's 4 (Graph's limit) would measure the limiter's waits.
        "graph": Adapter("graph", {"graph_api_endpoint": graph_control.api_endpoint, "graph_ca_file": Path(ca_file),
                                   "graph_mailbox_concurrency": threads, **unbound},
                         "coo@example.com", graph_control.app_credentials(), emulator=emulator,
                         served=_served(graph_control)),
    }  # fmt: skip
    return {name: every[name] for name in names}


def _configuration(args: argparse.Namespace, url: str) -> str:
    return "\n".join([
        f"adapters in calsync worker processes vs bare dramatiq: {args.jobs} jobs queued first per side, "
        "drain timed from 90 % to 10 % left",
        f"  shape {args.shape} (processes x threads), adapters {', '.join(args.adapters)}, {args.rounds} rounds, "
        f"provider latency {args.latency_ms} ms, "
        "sides alternating; emulators in one child process, their CPU reported apart",
        f"  Redis {url} ({'explicit' if args.redis_url else 'embedded, own'}), database sqlite, "
        "metrics + heartbeats + JSON logs (INFO) on",
        f"  {platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}",
    ])  # fmt: skip


def _line(drain: Drain, bare_rate: float) -> str:
    emulator = f", emulator {drain.emulator_cpu_ms_per_job:5.2f}" if drain.emulator_cpu_seconds else ""
    requests, failed = drain.requests_per_job
    counts = f"  {requests:.2f} requests/job ({failed:.2f} not 2xx)" if drain.requests[0] else ""
    return (f"  {drain.name:<30} {drain.rate:7.0f} jobs/s  {drain.cpu_ms_per_job:5.2f} ms CPU/job{emulator:<18}"
            f"  /bare {drain.rate / bare_rate:.2f}  {drain.redis_commands_per_job:.1f} Redis commands/job"
            f"{counts}")  # fmt: skip


def _shape(text: str) -> Shape:
    processes, _, threads = text.partition("x")
    return Shape(int(processes), int(threads))


def main() -> None:
    """Run the rounds (bare and every adapter, alternating) and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shape", type=_shape, default=Shape(1, 8), help="processes x threads, e.g. 1x8")
    parser.add_argument("--adapters", type=lambda text: text.split(","), default=list(ADAPTERS),
                        help=f"a comma-separated selection of {','.join(ADAPTERS)}")  # fmt: skip
    parser.add_argument("--latency-ms", type=int, default=0, help="every provider request answers after it")
    parser.add_argument("--compare", type=Path, help="also run each adapter from this calsync checkout (before/after)")
    add_redis_option(parser)
    args = parser.parse_args()
    if unknown := set(args.adapters) - set(ADAPTERS):
        parser.error(f"unknown adapters {', '.join(sorted(unknown))}; choose from {', '.join(ADAPTERS)}")
    results: dict[str, list[Drain]] = {}
    spawn = multiprocessing.get_context("spawn")
    with (
        tempfile.TemporaryDirectory(prefix="calsync-bench-adapt-") as tmp,
        bench_redis(args.redis_url, Path(tmp)) as url,
    ):
        scratch = Path(tmp)
        queue: Any = spawn.Queue()
        child = spawn.Process(target=_serve, args=(queue, tmp), daemon=True)
        child.start()
        try:
            urls, ca_file = queue.get(timeout=60)
            adapters = _adapters(
                args.adapters, urls, ca_file, psutil.Process(child.pid), args.shape.threads, args.latency_ms
            )
            print(_configuration(args, url), flush=True)
            for n in range(1, args.rounds + 1):
                sides: list[tuple[str, Callable[[], Drain]]] = [("bare", lambda: bare(url, args.jobs, args.shape,
                                                                                      scratch))]  # fmt: skip
                for tree in (None, args.compare) if args.compare else (None,):
                    sides += [(name if tree is None else f"{name} ({tree.name})",
                               lambda a=adapter, t=tree: calsync(url, args.jobs, args.shape, scratch, "sqlite", "",
                                                                 t, a, args.latency_ms))
                              for name, adapter in adapters.items()]  # fmt: skip
                if n % 2 == 0:
                    sides.reverse()
                measured = {side: run() for side, run in sides}
                print(f"round {n}:", flush=True)
                for side, drain in measured.items():
                    results.setdefault(side, []).append(drain)
                    print(_line(drain, measured["bare"].rate), flush=True)
        finally:
            child.terminate()
            child.join(timeout=10)
    _summary(args, results)


def _summary(args: argparse.Namespace, results: dict[str, list[Drain]]) -> None:
    print(f"median of {args.rounds} rounds ({args.shape}, CPU ms/job of the worker processes; emulator apart):")
    bare_runs = results["bare"]
    for side, runs in results.items():
        rate = statistics.median(d.rate for d in runs)
        cpu = statistics.median(d.cpu_ms_per_job for d in runs)
        emulator = statistics.median(d.emulator_cpu_ms_per_job for d in runs)
        requests = statistics.median(d.requests_per_job[0] for d in runs)
        counts = f", {requests:.2f} requests/job" if requests else ""
        ratios = [d.rate / b.rate for d, b in zip(runs, bare_runs, strict=True)]
        target = f" -- the target is >= {TARGETS[side]}" if side in TARGETS else ""
        print(f"  {runs[0].name:<30} {rate:7.0f} jobs/s  {cpu:5.2f} ms CPU/job  emulator {emulator:5.2f} ms/job"
              f"  /bare {statistics.median(ratios):.2f}{counts}{target}"
              f" (rounds: {', '.join(f'{x:.2f}' for x in ratios)})")  # fmt: skip


if __name__ == "__main__":
    main()
