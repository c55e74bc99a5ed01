"""CPU per job and jobs/s of the memory, Google and Graph adapters, each against its emulator, in one run.

    .venv/bin/python benchmarks/adapters_graph.py [--events 300] [--threads 8] [--rounds 3]

Each round syncs ``--events`` events through every adapter (a create, then an update of each) on a pool of
``--threads`` threads, as worker threads would call them. The emulators run in a child process, so the CPU
time measured (``time.process_time`` of this process) is the adapter and its client libraries only: the
memory provider's SQLite file, google-api-python-client + httplib2 over http, httpx + msal over https for
Graph. Adapters alternate per round; it prints each round and the medians. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import datetime as dt
import multiprocessing
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calsync.core.model.calendar import Account, EventState, Provider, Target
from calsync.providers.google import GoogleConfig, GoogleProvider
from calsync.providers.graph import GraphConfig, GraphProvider
from calsync.providers.memory import MemoryProvider
from calsync_emulators import google, graph
from calsync_emulators.control import GoogleControl, GraphControl
from calsync_emulators.server import RunningEmulator


def _serve(queue: Any, scratch: str) -> None:
    tls = graph.self_signed(Path(scratch))
    google_server = RunningEmulator(google.create_app())
    exchange = RunningEmulator(graph.create_app(), tls=tls.context)
    queue.put((google_server.url, exchange.url, str(tls.ca_file)))
    threading.Event().wait()


@dataclass
class Rig:
    """One adapter and the account it writes into."""

    name: str
    provider: Provider
    account: Account
    reset: Callable[[], None]


def _event(n: int, version: int) -> EventState:
    start = dt.datetime(2030, 1, 1, 9, tzinfo=dt.UTC) + dt.timedelta(hours=n)
    return EventState(f"e{n}", "t1", version, f"Event {n} v{version}", start, start + dt.timedelta(minutes=30),
                      "UTC", False, attendees=("bob@example.com",), send_updates="all")  # fmt: skip


def _round(rig: Rig, events: int, threads: int) -> tuple[float, float]:
    """(jobs/s, CPU ms per job) of creating then updating ``events`` events."""
    rig.reset()
    refs: dict[int, Any] = {}

    def create(n: int) -> None:
        refs[n] = rig.provider.upsert(rig.account, _event(n, 1), Target(f"e{n}", rig.account.id, "t1"))

    def update(n: int) -> None:
        ref = refs[n]
        target = Target(f"e{n}", rig.account.id, "t1", ref.external_id, ref.etag, 1)
        rig.provider.upsert(rig.account, _event(n, 2), target)

    create(-1)  # warm-up: connections, tokens, discovery documents
    cpu, wall = time.process_time(), time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(create, range(events)))
        list(pool.map(update, range(events)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    jobs = 2 * events
    return jobs / wall, cpu * 1000 / jobs


def main() -> None:
    """Run the rounds and print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=300)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="calsync-adapters-"))
    queue: Any = multiprocessing.get_context("spawn").Queue()
    child = multiprocessing.get_context("spawn").Process(target=_serve, args=(queue, str(scratch)), daemon=True)
    child.start()
    google_url, exchange_url, ca_file = queue.get(timeout=60)
    google_control, graph_control = GoogleControl(google_url), GraphControl(exchange_url)
    memory = MemoryProvider(scratch / "memory.sqlite3")
    rigs = [
        Rig("memory", memory, Account("m", "t1", "memory", "team@example.com"), memory.reset),
        Rig("google", GoogleProvider(GoogleConfig(10, google_control.api_endpoint)),
            Account("g", "t1", "google", "ceo@example.com",
                    credentials=google_control.user_credentials("1//rt", "client", "secret")),
            google_control.reset),
        Rig("graph", GraphProvider(GraphConfig(10, graph_control.api_endpoint, args.threads, Path(ca_file))),
            Account("x", "t1", "graph", "coo@example.com", credentials=graph_control.app_credentials()),
            graph_control.reset),
    ]  # fmt: skip
    results: dict[str, list[tuple[float, float]]] = {rig.name: [] for rig in rigs}
    for number in range(1, args.rounds + 1):
        for rig in rigs:
            if rig.name == "graph":
                rig.provider.close()  # after a reset the emulator has forgotten our token
            rate, cpu = _round(rig, args.events, args.threads)
            results[rig.name].append((rate, cpu))
            print(f"round {number} {rig.name:7} {rate:8.0f} jobs/s {cpu:7.2f} CPU ms/job")
    print(f"\nmedians over {args.rounds} rounds, {2 * args.events} jobs each, {args.threads} threads:")
    for name, rows in results.items():
        print(f"  {name:7} {statistics.median(r[0] for r in rows):8.0f} jobs/s "
              f"{statistics.median(r[1] for r in rows):7.2f} CPU ms/job")  # fmt: skip
    for rig in rigs:
        rig.provider.close()
    child.terminate()


if __name__ == "__main__":
    main()
