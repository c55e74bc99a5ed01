"""Blast radius: one broken account beside two healthy ones of the same provider, per provider.

    PYTHONPATH=.:emulators .venv/bin/python benchmarks/blast_radius.py [--providers google,exchange,graph]
        [--duration 90] [--every 2] [--threads 8] [--set NAME=VALUE ...] [--redis-url URL]

For each provider, real worker threads (one process, ``--threads``) with the real adapter against its
emulator (in this process; Graph over https) and default settings unless ``--set`` overrides one. Three
accounts of one tenant: the broken one, whose calendar answers HTTP 500 to every write (the emulator's
fault rules: Google POST/PUT/PATCH/DELETE on its calendar, EWS CreateItem/UpdateItem/DeleteItem on its
mailbox, Graph events.create/update/delete on its mailbox), and two healthy ones. Each healthy account has
one event, created and synced first; then, for ``--duration`` seconds, every ``--every`` seconds each
healthy event is edited and the broken account gets a new event (so its failing jobs pile up, as a broken
mailbox's do). Measured (targets polled every 50 ms): each healthy edit's sync latency, from its submit
until its target has synced that version (worst and p50); whether the provider's circuit breaker was ever
seen not closed, and the broken account's (it may open); the job outcomes and dead letters. An edit not synced
``SETTLE_TIMEOUT`` seconds after the last round counts with its wait so far (the worst is then a lower bound, "≥").
Its own embedded Redis and SQLite file per provider unless told otherwise; every key it wrote is deleted
at the end. It is a benchmark, not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dramatiq

from benchmarks.support import add_redis_option, bench_redis, in_process_worker, namespace, remove_keys
from calsync.core.clients import Clients
from calsync.core.config.settings import Settings
from calsync.core.model.calendar import ProviderName
from calsync.core.producer.submit import Producer
from calsync.core.store import accounts, dead_letters, targets
from calsync.core.store.dead_letters import DeadLetterFilter
from calsync.core.store.targets import TargetKey
from calsync.core.traffic import TrafficStore
from calsync_emulators import ews, google, graph
from calsync_emulators.control import EmulatorControl, EwsControl, GoogleControl, GraphControl
from calsync_emulators.server import RunningEmulator

PROVIDERS: tuple[ProviderName, ...] = ("google", "exchange", "graph")
START = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC)
SETTLE_TIMEOUT = 120.0  # how long the last healthy edits may take to sync after the run
_SERVICE_ACCOUNT = {"username": "svc@example.com", "password": "svc-password"}  # the EWS emulator's default


@dataclass
class Provider:
    """One provider's emulator, the settings that point calsync at it, and how to break one account."""

    name: ProviderName
    server: RunningEmulator
    control: EmulatorControl
    settings: dict[str, Any]

    def credentials(self, address: str) -> dict[str, Any]:
        """The account's credentials (stored encrypted)."""
        if isinstance(self.control, GoogleControl):
            return self.control.user_credentials(f"1//{address}", "client", "secret")
        if isinstance(self.control, GraphControl):
            return self.control.app_credentials()
        return dict(_SERVICE_ACCOUNT)

    def options(self) -> dict[str, Any]:
        """The account's options."""
        if self.name == "exchange":
            assert isinstance(self.control, EwsControl)
            return {"server_url": self.control.server_url, "auth_type": "basic", "access_type": "impersonation"}
        return {}

    def break_writes(self, address: str) -> None:
        """Every write to ``address``'s calendar answers 500 from now on."""
        if self.name == "google":
            for method in ("POST", "PUT", "PATCH", "DELETE"):
                self.control.add_fault(method=method, path=f"/calendars/{address}/events", status=500)
            return
        operations = (("events.create", "events.update", "events.delete") if self.name == "graph"
                      else ("CreateItem", "UpdateItem", "DeleteItem"))  # fmt: skip
        for operation in operations:
            self.control.add_fault(operation=operation, mailbox=address, status=500)


def _provider(name: ProviderName, scratch: Path) -> Provider:
    if name == "google":
        server = RunningEmulator(google.create_app())
        google_control = GoogleControl(server.url)
        return Provider(name, server, google_control, {"google_api_endpoint": google_control.api_endpoint})
    if name == "exchange":
        server = RunningEmulator(ews.create_app())
        return Provider(name, server, EwsControl(server.url), {})
    tls = graph.self_signed(scratch)
    server = RunningEmulator(graph.create_app(), tls=tls.context)
    control = GraphControl(server.url)
    return Provider(name, server, control, {"graph_api_endpoint": control.api_endpoint, "graph_ca_file": tls.ca_file})


@dataclass
class Watch:
    """Polls the healthy edits' targets and the breakers until stopped."""

    clients: Clients
    provider: str
    broken: str
    submitted: dict[tuple[str, str, int], float] = field(default_factory=dict)  # (entity, account, version)
    synced: dict[tuple[str, str, int], float] = field(default_factory=dict)
    provider_opened: bool = False
    broken_opened: bool = False
    others_opened: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self._traffic = TrafficStore(self.clients.redis, self.clients.keys)
        self._tenant = ""
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._poll, name="blast-watch", daemon=True)

    def start(self, tenant: str) -> None:
        """Start polling the targets of ``tenant``."""
        self._tenant = tenant
        self._thread.start()

    def expect(self, entity: str, account: str, version: int, at: float) -> None:
        """A healthy edit was submitted at ``at``: watch for its version to be synced."""
        with self._lock:
            self.submitted[(entity, account, version)] = at

    def pending(self) -> int:
        """Healthy edits not synced yet."""
        with self._lock:
            return len(self.submitted) - len(self.synced)

    def stop(self) -> None:
        """Stop polling (again: nothing)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def latencies(self, now: float) -> tuple[list[float], list[float]]:
        """Seconds from submit to synced of the synced edits, and so far (a lower bound) of the others, sorted."""
        synced = sorted(self.synced[key] - at for key, at in self.submitted.items() if key in self.synced)
        waiting = sorted(now - at for key, at in self.submitted.items() if key not in self.synced)
        return synced, waiting

    def _poll(self) -> None:
        while not self._stop.wait(0.05):
            circuits = self._traffic.circuits(self.provider, listed=10)
            self.provider_opened |= circuits.state != "closed"
            self.broken_opened |= self.broken in circuits.some_accounts
            self.others_opened |= set(circuits.some_accounts) - {self.broken}
            with self._lock:
                waiting = [key for key in self.submitted if key not in self.synced]
            now = time.monotonic()
            with self.clients.db.read() as conn:
                rows = {key: targets.get_target(conn, TargetKey(self._tenant, key[0], key[1])) for key in waiting}
            with self._lock:
                for key, row in rows.items():
                    if row is not None and row.synced_version >= key[2]:
                        self.synced[key] = now


def _accounts(clients: Clients, provider: Provider, tenant: str) -> list[str]:
    """The broken account first, then the two healthy ones."""
    with clients.db.write() as conn:
        return [accounts.add_account(conn, tenant_id=tenant, provider=provider.name, address=f"{role}@example.com",
                                     credentials=clients.cipher.encrypt(provider.credentials(f"{role}@example.com")),
                                     options=provider.options(), account_id=f"{tenant}-{role}").id
                for role in ("broken", "healthy1", "healthy2")]  # fmt: skip


def _change(title: str, account: str, entity: str | None = None) -> dict[str, Any]:
    event = {"title": title, "start": START.isoformat(), "end": (START + dt.timedelta(hours=1)).isoformat()}
    return {"operation": "upsert", "accounts": [account], "event": event,
            **({"entity_id": entity} if entity else {})}  # fmt: skip


def run(name: ProviderName, args: argparse.Namespace, url: str, scratch: Path) -> dict[str, Any]:
    """One provider's run; returns its figures."""
    ns = namespace(f"blast-{name}")
    where = scratch / name
    where.mkdir()
    provider = _provider(name, where)
    overrides = dict(item.split("=", 1) for item in args.set)
    app = in_process_worker(where, url, ns, worker_threads=args.threads, **provider.settings, **overrides)
    clients = app.clients
    worker: dramatiq.Worker | None = None
    watch = None
    try:
        tenant = f"blast-{uuid.uuid4().hex[:6]}"
        broken, *healthy = _accounts(clients, provider, tenant)
        producer = Producer(clients)
        watch = Watch(clients, name, broken)
        worker = dramatiq.Worker(app.clients.broker, worker_threads=args.threads, worker_timeout=100)
        worker.start()
        entities = {}
        for account in healthy:  # created and synced before the broken account fails
            receipt = producer.submit(tenant, _change("Healthy 0", account))
            entities[account] = receipt.entity_id
            watch.expect(receipt.entity_id, account, receipt.version, time.monotonic())
        watch.start(tenant)
        while watch.pending():
            time.sleep(0.05)
        provider.break_writes("broken@example.com")
        watch.submitted.clear()
        watch.synced.clear()
        for n in range(args.backlog):  # what the broken account had queued when it broke
            producer.submit(tenant, _change(f"Backlog {n}", broken))
        started = time.monotonic()
        rounds = 0
        while (now := time.monotonic()) < started + args.duration:
            rounds += 1
            producer.submit(tenant, _change(f"Broken {rounds}", broken))
            for account in healthy:
                receipt = producer.submit(tenant, _change(f"Healthy {rounds}", account, entities[account]))
                watch.expect(receipt.entity_id, account, receipt.version, now)
            time.sleep(max(0.0, started + rounds * args.every - time.monotonic()))
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while watch.pending() and time.monotonic() < deadline:
            time.sleep(0.05)
        watch.stop()
        latencies, waiting = watch.latencies(time.monotonic())
        app.stats.flush()
        with clients.db.read() as conn:
            dead = len(dead_letters.find(conn, DeadLetterFilter()))
        return {
            "edits": len(watch.submitted),
            "unsynced": len(waiting),
            "worst": max(latencies[-1:] + waiting[-1:]),  # an edit never synced: at least its wait so far
            "p50": statistics.median(latencies + waiting),
            "provider_opened": watch.provider_opened,
            "broken_opened": watch.broken_opened,
            "others_opened": sorted(watch.others_opened),
            "broken_events": rounds,
            "outcomes": dict(app.stats.totals(minutes=60)),
            "dead_letters": dead,
        }
    finally:
        if watch is not None:
            watch.stop()
        if worker is not None:
            worker.stop(timeout=10_000)
        app.close()
        provider.server.stop()
        remove_keys(url, ns)


def main() -> None:
    """Print the configuration, then each provider's figures."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--providers", default=",".join(PROVIDERS), help="comma-separated, of " + ", ".join(PROVIDERS))
    parser.add_argument("--duration", type=float, default=90, help="seconds of edits while one account is broken")
    parser.add_argument("--every", type=float, default=2, help="seconds between two rounds of edits")
    parser.add_argument("--backlog", type=int, default=20, help="new events of the broken account when it breaks")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a setting to override")
    add_redis_option(parser)
    args = parser.parse_args()
    asked = {n.strip() for n in args.providers.split(",") if n.strip()}
    unknown = sorted(asked - set(PROVIDERS))
    if unknown:
        parser.error(f"unknown provider {unknown[0]!r}; choose from {', '.join(PROVIDERS)}")
    names = [name for name in PROVIDERS if name in asked]
    shown = Settings(**dict(item.split("=", 1) for item in args.set))
    print(f"blast radius: 1 broken account (every write answers 500) + 2 healthy ones per provider, a round of "
          f"edits every {args.every:g} s for {args.duration:g} s (each healthy event edited, a new event for the "
          f"broken account); 1 process x {args.threads} threads; breaker {shown.breaker_failures} failures, open "
          f"{shown.breaker_open_seconds:g} s; retry schedule {shown.retry_schedule}; overrides {args.set or 'none'}",
          flush=True)  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="calsync-blast-") as tmp, bench_redis(args.redis_url, Path(tmp)) as url:
        for name in names:
            f = run(name, args, url, Path(tmp))
            bound = "≥ " if f["unsynced"] else ""  # an edit never synced counts with its wait so far
            print(f"{name}: healthy edits synced worst {bound}{f['worst']:.2f} s, p50 {f['p50']:.2f} s "
                  f"({f['edits']} edits, {f['unsynced']} never synced); provider breaker ever open: "
                  f"{'YES' if f['provider_opened'] else 'no'}; broken account's breaker opened: "
                  f"{'yes' if f['broken_opened'] else 'no'}; other accounts' breakers opened: "
                  f"{f['others_opened'] or 'none'}; outcomes {f['outcomes']}; dead letters {f['dead_letters']}",
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
