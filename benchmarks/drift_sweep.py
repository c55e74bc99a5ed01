"""``benchmarks/drift.py --what sweep``: the whole sweep job (core/drift/sweep.py ``run_sweep``) per account.

What it sets up: its own Redis (embedded unless ``--redis-url``) and SQLite file migrated to the head, a secret
key; the events (``--events``, one tenant) and, once the emulator is seeded with what calsync wrote, one Google
account per calendar and its targets synced with the seeded etags, as workers leave them. The sweeps run under
traffic control's gate in Redis (its per-provider rate lifted: at the default, 100 requests a second for
Google, a pass over 1,000 accounts would take 10 s of waiting), the tenant's policy the default ``report``,
no webhook endpoint (no outbox).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from cryptography.fernet import Fernet

from benchmarks.support import bench_redis, migrated_clients, namespace, remove_keys
from calsync.core.config.settings import Settings
from calsync.core.drift.sweep import SweepParts, run_sweep
from calsync.core.model.calendar import Account, EventState, Target
from calsync.core.model.change import EventFields
from calsync.core.store import accounts, events, targets
from calsync.core.store.targets import TargetKey
from calsync.core.traffic import TrafficGate, TrafficStore, provider_limits
from calsync.providers.google.event_body import event_id_for
from calsync.providers.google.provider import GoogleProvider
from calsync.providers.registry import ProviderRegistry
from calsync_emulators.control import GoogleControl

#: Starts the seeded emulator for these events: (its process, its URL, the etags per account and event).
Start = Callable[[argparse.Namespace, list[EventState]], tuple[Any, str, list[list[str]]]]


@dataclass(frozen=True)
class Whole:
    """A seeded emulator and database, and the sweep of one account through the job."""

    child: Any
    url: str
    states: list[EventState]
    provider: GoogleProvider
    sweep_one: Callable[[Account, bool], tuple[int, int, bool]]


@contextlib.contextmanager
def whole_sweeps(args: argparse.Namespace, scratch: Path, start: Start, tenant: str,
                 calendar: Callable[[int], str], event: Callable[[int], EventState]) -> Iterator[Whole]:  # fmt: skip
    """Seed the database and the emulator (module docstring); yields the parts, removes the keys afterwards."""
    with bench_redis(args.redis_url, scratch) as redis_url:
        ns = namespace("drift")
        settings = Settings(data_dir=scratch, broker_url=redis_url, redis_namespace=ns, log_level="ERROR",
                            database_url=f"sqlite:///{scratch / 'calsync.sqlite3'}",
                            secret_key=Fernet.generate_key().decode(), provider_rate={"google": 0.0})  # fmt: skip
        clients = migrated_clients(settings)
        try:
            states = _events(clients.db, tenant, [event(m) for m in range(args.events)])
            child, url, etags = start(args, states)
            control = GoogleControl(url)
            settings = settings.model_copy(update={"google_api_endpoint": control.api_endpoint})
            registry = ProviderRegistry(settings)
            _accounts(clients, control, tenant, calendar, states, etags)
            traffic = TrafficGate(TrafficStore(clients.redis, clients.keys), provider_limits(settings, lease=60))
            parts = SweepParts(clients.db, clients.cipher, registry, clients.broker, settings.queue, traffic)

            def sweep_one(account: Account, full: bool) -> tuple[int, int, bool]:
                result = run_sweep(parts, account.id)
                if result.skipped is not None:
                    raise RuntimeError(f"the sweep of {account.id} read nothing: {result.skipped}")
                return result.verified, len(result.findings), result.full

            yield Whole(child, url, states, cast(GoogleProvider, registry.get("google")), sweep_one)
        finally:
            clients.close()
            remove_keys(redis_url, ns)


def _events(db: Any, tenant: str, wanted: list[EventState]) -> list[EventState]:
    """The events stored at version 1, as the store gives them back (what the sweep's fingerprints start from)."""
    with db.write() as conn:
        for state in wanted:
            fields = EventFields(title=state.title, time_zone=state.time_zone, all_day=state.all_day,
                                 start=state.start, end=state.end, location=state.location,
                                 description=state.description, attendees=state.attendees)  # fmt: skip
            events.insert_event(conn, tenant, state.id, fields, "none")
    with db.read() as conn:
        return [cast(EventState, events.get_event(conn, tenant, state.id)) for state in wanted]


def _accounts(clients: Any, control: GoogleControl, tenant: str, calendar: Callable[[int], str],
              states: list[EventState], etags: list[list[str]]) -> None:  # fmt: skip
    """One account per seeded calendar, its targets synced at version 1 with the etags the emulator gave."""
    now = dt.datetime.now(dt.UTC)
    for n, account_etags in enumerate(etags):
        account_id = f"acct{n}"
        credentials = clients.cipher.encrypt(control.user_credentials(f"1//bench-{n}", "client", "secret"))
        with clients.db.write() as conn:
            accounts.add_account(conn, tenant_id=tenant, provider="google", address=calendar(n),
                                 credentials=credentials, options={}, account_id=account_id)  # fmt: skip
            keys = [TargetKey(tenant, state.id, account_id) for state in states]
            targets.plan_targets(conn, [(key, "present") for key in keys], version=1, due_at=now, existing=())
            for key, etag in zip(keys, account_etags, strict=True):
                sync_key = Target(event_id=key.event_id, account_id=account_id, tenant_id=tenant).sync_key
                targets.record_synced(conn, key, version=1, external_id=event_id_for(sync_key), etag=etag,
                                      final_status="synced")  # fmt: skip
