"""A retry surge: N jobs across M Google accounts while the provider answers 503 for a while, then recovers.

    PYTHONPATH=.:emulators .venv/bin/python benchmarks/surge.py [--jobs 5000] [--accounts 50] [--outage 60]
        [--threads 8] [--latency-ms 20] [--second-after 2] [--set NAME=VALUE ...] [--redis-url URL]

Real worker threads (one process, ``--threads``) with the real Google adapter against the Google emulator
(in this process, a ``--latency-ms`` delay on every API call); default settings unless ``--set``
overrides one (e.g. ``--set breaker_open_seconds=5``). Every job is enqueued on the lane the producer
would choose (``BULK_THRESHOLD`` normal, the rest bulk), then the workers start into the outage; after
``--outage`` seconds the emulator recovers. Printed: the requests per second the emulator received during
the outage (≈ the breakers' probe rate once they opened), attempts burned (retries scheduled) and dead
letters, deferrals, the drain time after recovery, the highest number of requests ever in flight per
calendar (from the emulator; never above ``ACCOUNT_CONCURRENCY``), and the cost traffic control adds per
job (admit + settle on this Redis, side by side with an ungoverned call).

The second tenant's latency during the flood: a second tenant with one Google account (same emulator)
submits one change through ``Producer.submit`` half-way through the outage, and another one
``--second-after`` seconds after the recovery, while the flood drains. Measured (polled every 50 ms):
for the first, seconds from the recovery until its target is synced (the provider cannot take it
earlier); for the second, seconds from its submit until its target is synced; and the flood's targets
still pending at each submit.
Its own embedded Redis and SQLite file unless told otherwise; every key it wrote is deleted at the end.
It is a benchmark, not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import dramatiq

from benchmarks.support import add_redis_option, bench_redis, in_process_worker, namespace, remove_keys
from calsync.core.clients import Clients, connect
from calsync.core.config.settings import Settings
from calsync.core.messaging.lanes import lanes_of
from calsync.core.messaging.messages import sync_message
from calsync.core.model.calendar import Account
from calsync.core.model.change import EventFields
from calsync.core.model.payload import new_payload
from calsync.core.model.provider_io import RequestsSent
from calsync.core.producer.fairness import lane_choice
from calsync.core.producer.submit import Producer
from calsync.core.store import accounts, dead_letters, events, targets
from calsync.core.store.dead_letters import DeadLetterFilter
from calsync.core.store.targets import TargetKey, Wanted
from calsync.core.traffic import Limits, TrafficGate, TrafficStore, provider_limits
from calsync_emulators import google
from calsync_emulators.control import GoogleControl
from calsync_emulators.server import RunningEmulator

API = "/calendar/v3/calendars/"
TIMEOUT = 1800.0
START = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC)


def _google_accounts(clients: Clients, emulator: GoogleControl, tenant: str, count: int) -> list[str]:
    """``count`` Google accounts of ``tenant`` with emulator credentials."""
    with clients.db.write() as conn:
        return [accounts.add_account(conn, tenant_id=tenant, provider="google", address=f"{tenant}-{n}@example.com",
                                     credentials=clients.cipher.encrypt(emulator.user_credentials(
                                         f"1//{tenant}-{n}", "client", "secret")), options={}).id
                for n in range(count)]  # fmt: skip


def _seed(clients: Clients, emulator: GoogleControl, jobs: int, account_count: int) -> tuple[str, dict[str, int]]:
    """Accounts and ``jobs`` events spread round-robin over them, enqueued on the producer's lanes."""
    tenant = f"surge-{uuid.uuid4().hex[:6]}"
    start = START
    fields = EventFields(title="Surge", start=start, end=start + dt.timedelta(hours=1))
    names = _google_accounts(clients, emulator, tenant, account_count)
    payloads = []
    planned: list[tuple[TargetKey, Wanted]] = []
    with clients.db.write() as conn:
        for n in range(jobs):
            entity, account = f"evt{n}", names[n % account_count]
            events.insert_event(conn, tenant, entity, fields, "none")
            planned.append((TargetKey(tenant, entity, account), "present"))
            payloads.append(new_payload(tenant_id=tenant, entity_id=entity, account_id=account, operation="create",
                                        version=1, trace_id="surge"))  # fmt: skip
        targets.plan_targets(conn, planned, version=1, due_at=dt.datetime.now(dt.UTC), existing=())
    queues = lanes_of(clients.settings)
    chosen = lane_choice(clients).lanes(tenant, len(payloads))
    for payload, lane in zip(payloads, chosen, strict=True):
        clients.broker.enqueue(sync_message(queues.queue(lane), payload))
    return tenant, {lane: chosen.count(lane) for lane in ("normal", "bulk")}


class SecondTenant:
    """The second tenant's changes during the flood: when each was submitted and when its target was synced."""

    def __init__(self, clients: Clients, emulator: GoogleControl) -> None:
        self.clients = clients
        self.tenant = f"second-{uuid.uuid4().hex[:6]}"
        self.account = _google_accounts(clients, emulator, self.tenant, 1)[0]
        self.producer = Producer(clients)
        self.submitted: dict[str, float] = {}
        self.synced: dict[str, float] = {}
        self.pending_at: dict[str, int] = {}  # targets still pending at the submit (the flood's, and its own)
        self._keys: dict[str, TargetKey] = {}
        self._stop = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="second-tenant", daemon=True)
        self._watcher.start()

    def submit(self, name: str) -> None:
        """One change of the second tenant to its one account."""
        self.pending_at[name] = _pending(self.clients)
        end = START + dt.timedelta(hours=1)
        change = {"operation": "upsert", "accounts": [self.account],
                  "event": {"title": f"Second {name}", "start": START.isoformat(), "end": end.isoformat()}}  # fmt: skip
        self.submitted[name] = time.monotonic()
        receipt = self.producer.submit(self.tenant, change)
        self._keys[name] = TargetKey(self.tenant, receipt.entity_id, self.account)

    def wait(self, timeout: float) -> None:
        """Until every submitted change is synced (or ``timeout``), then stop watching."""
        deadline = time.monotonic() + timeout
        while len(self.synced) < len(self.submitted) and time.monotonic() < deadline:
            time.sleep(0.05)
        self._stop.set()
        self._watcher.join()

    def _watch(self) -> None:
        while not self._stop.wait(0.05):
            for name, key in list(self._keys.items()):
                if name in self.synced:
                    continue
                with self.clients.db.read() as conn:
                    row = targets.get_target(conn, key)
                if row is not None and row.status == "synced":
                    self.synced[name] = time.monotonic()


def _pending(clients: Clients) -> int:
    with clients.db.read() as conn:
        return targets.count_by_status(conn).get("pending", 0)


def _api_requests(emulator: GoogleControl) -> list[dict[str, Any]]:
    return [r for r in emulator.requests() if str(r["path"]).startswith(API)]


def admission_cost(url: str, rounds: int) -> tuple[float, float, float]:
    """Microseconds per job of the gate around a call, governed (admit + settle) and ungoverned, and of one PING."""
    ns = namespace("surge-cost")
    settings = Settings(broker_url=url, redis_namespace=ns)
    clients = connect(settings)
    try:
        limits = provider_limits(settings, lease=settings.job_time_limit + 5)
        governed = Account(id="a", tenant_id="t", provider="google", address="a@example.com")
        free = Account(id="a", tenant_id="t", provider="memory", address="a@example.com")
        limits["google"] = Limits(concurrency=4, breaker_failures=5)  # no bucket: every round is admitted
        gate = TrafficGate(TrafficStore(clients.redis, clients.keys), limits)
        figures = []
        for account in (governed, free):
            started = time.perf_counter()
            for _ in range(rounds):
                with gate.call(account, None, RequestsSent()):
                    pass
            figures.append((time.perf_counter() - started) / rounds * 1e6)
        started = time.perf_counter()
        for _ in range(rounds):
            clients.redis.ping()
        return figures[0], figures[1], (time.perf_counter() - started) / rounds * 1e6
    finally:
        clients.close()
        remove_keys(url, ns)


def run(args: argparse.Namespace, url: str, scratch: Path) -> dict[str, Any]:
    """One surge; returns its figures."""
    ns = namespace("surge")
    emulator_app = RunningEmulator(google.create_app())
    emulator = GoogleControl(emulator_app.url)
    overrides = dict(item.split("=", 1) for item in args.set)
    app = in_process_worker(scratch, url, ns, google_api_endpoint=emulator.api_endpoint, worker_threads=args.threads,
                            **overrides)  # fmt: skip
    clients, settings = app.clients, app.clients.settings
    worker: dramatiq.Worker | None = None
    try:
        emulator.add_fault(path=API, status=503)  # first: the outage wins while it lasts
        emulator.add_fault(path=API, delay_ms=args.latency_ms)  # then: every call's latency
        _, lanes = _seed(clients, emulator, args.jobs, args.accounts)
        second = SecondTenant(clients, emulator)
        worker = dramatiq.Worker(app.clients.broker, worker_threads=args.threads, worker_timeout=100)
        started = time.monotonic()
        recovers_at = started + args.outage
        worker.start()
        time.sleep(max(0.0, started + args.outage / 2 - time.monotonic()))
        second.submit("held")
        time.sleep(max(0.0, recovers_at - time.monotonic()))
        outage_requests = len(_api_requests(emulator))
        outage_seconds = time.monotonic() - started
        app.stats.flush()
        during = dict(app.stats.totals(minutes=60))
        emulator.clear_faults()
        emulator.add_fault(path=API, delay_ms=args.latency_ms)
        recovered = time.monotonic()
        before = len(_api_requests(emulator))
        first_call = None
        while pending := _pending(clients):
            if first_call is None and len(_api_requests(emulator)) > before:
                first_call = time.monotonic() - recovered
            if "draining" not in second.submitted and time.monotonic() - recovered >= args.second_after:
                second.submit("draining")
            if time.monotonic() - recovered > TIMEOUT:
                raise TimeoutError(f"{pending} targets still pending {TIMEOUT:g} s after recovery")
            time.sleep(0.2)
        drained = time.monotonic() - recovered
        if "draining" not in second.submitted:
            second.submit("draining")  # the flood drained first: measured on an idle worker
        second.wait(TIMEOUT)
        app.stats.flush()
        outcomes = dict(app.stats.totals(minutes=60))
        with clients.db.read() as conn:
            dead = len(dead_letters.find(conn, DeadLetterFilter()))
            by_status = targets.count_by_status(conn)
        highest = emulator.highest_concurrency()
        limit = settings.account_concurrency["google"]
        return {
            "outage_requests": outage_requests,
            "outage_seconds": outage_seconds,
            "outage_outcomes": during,
            "outcomes": outcomes,
            "dead_letters": dead,
            "synced": by_status.get("synced", 0),
            "drain_seconds": drained,
            "first_call_seconds": first_call if first_call is not None else drained,
            "drain_rate": args.jobs / drained if drained else float("inf"),
            "highest_per_account": max(highest.values(), default=0),
            "accounts_over_limit": sorted(k for k, v in highest.items() if v > limit),
            "lanes": lanes,
            "second_held": second.synced["held"] - recovered,
            "second_held_pending": second.pending_at["held"],
            "second_draining": second.synced["draining"] - second.submitted["draining"],
            "second_draining_pending": second.pending_at["draining"],
            "second_draining_after": second.submitted["draining"] - recovered,
        }
    finally:
        if worker is not None:
            worker.stop(timeout=10_000)
        app.close()
        emulator_app.stop()
        remove_keys(url, ns)


def main() -> None:
    """Print the configuration, then the surge's figures."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--accounts", type=int, default=50)
    parser.add_argument("--outage", type=float, default=60, help="seconds the emulator answers 503")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--latency-ms", type=int, default=20, help="the emulator's delay on every API call")
    parser.add_argument("--cost-rounds", type=int, default=2000, help="admit + settle pairs timed for the cost")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a setting to override")
    parser.add_argument("--second-after", type=float, default=2,
                        help="seconds after the recovery the second tenant submits its second change")  # fmt: skip
    add_redis_option(parser)
    args = parser.parse_args()
    shown = Settings(**dict(item.split("=", 1) for item in args.set))
    print(f"surge: {args.jobs} jobs over {args.accounts} Google accounts (emulator, {args.latency_ms} ms per call), "
          f"503 for {args.outage:g} s; 1 process x {args.threads} threads; google limits: concurrency "
          f"{shown.account_concurrency['google']}, {shown.account_rate['google']:g}/s per account, "
          f"{shown.provider_rate['google']:g}/s per provider, tenant {shown.tenant_rate:g}/s; "
          f"breaker {shown.breaker_failures['google']} failures, open "
          f"{shown.breaker_open_seconds:g} s; retry schedule {shown.retry_schedule}; bulk lane past "
          f"{shown.bulk_threshold} jobs per {shown.bulk_window:g} s; overrides {args.set or 'none'}",
          flush=True)  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="calsync-surge-") as tmp, bench_redis(args.redis_url, Path(tmp)) as url:
        governed, free, ping = admission_cost(url, args.cost_rounds)
        print(f"traffic control per job: {governed:.0f} us governed (admit + settle) vs {free:.1f} us ungoverned "
              f"(memory provider); one PING on the same connection {ping:.0f} us ({governed / ping:.1f} PINGs); "
              f"{args.cost_rounds} rounds", flush=True)  # fmt: skip
        figures = run(args, url, Path(tmp))
    during, outcomes = figures["outage_outcomes"], figures["outcomes"]
    print(f"outage: {figures['outage_requests']} provider requests in {figures['outage_seconds']:.1f} s = "
          f"{figures['outage_requests'] / figures['outage_seconds']:.2f}/s; attempts burned "
          f"{during.get('retry_scheduled', 0)}, deferred {during.get('deferred', 0)}, dead letters "
          f"{during.get('dead_lettered', 0)}")  # fmt: skip
    print(f"whole run: synced {figures['synced']}/{args.jobs + 2} (the flood, on lanes {figures['lanes']}, and the "
          f"second tenant's 2); attempts burned {outcomes.get('retry_scheduled', 0)}, "
          f"deferred {outcomes.get('deferred', 0)}, dead letters {figures['dead_letters']}; drain after recovery "
          f"{figures['drain_seconds']:.1f} s ({figures['drain_rate']:.0f} jobs/s; first call to the recovered provider "
          f"after {figures['first_call_seconds']:.1f} s); highest in flight per account "
          f"{figures['highest_per_account']} (over the limit: {figures['accounts_over_limit'] or 'none'})")  # fmt: skip
    print(f"second tenant (one Google account, same emulator): its change submitted half-way through the outage "
          f"({figures['second_held_pending']} targets pending) synced {figures['second_held']:.2f} s after the "
          f"recovery; its change submitted {figures['second_draining_after']:.1f} s after the recovery "
          f"({figures['second_draining_pending']} targets still pending) synced "
          f"{figures['second_draining']:.2f} s after its submit")  # fmt: skip


if __name__ == "__main__":
    main()
