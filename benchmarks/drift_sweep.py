"""``benchmarks/drift.py --what sweep``: the whole sweep job (core/drift/sweep.py ``run_sweep``) per account.

What it sets up: its own Redis (embedded unless ``--redis-url``) and SQLite file migrated to the head, a secret
key; the events (``--events``, one tenant) and, once the emulator is seeded with what calsync wrote, one account
of the provider per calendar or mailbox and its targets synced with the seeded ids and etags, as workers leave
them. The sweeps run under traffic control's gate in Redis (the per-provider rates lifted: at the default, 100
requests a second for Google, a pass over 1,000 accounts would take 10 s of waiting), the tenant's policy the
default ``report``, no webhook endpoint (no outbox).
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

from benchmarks.drift_emulators import TENANT, Emulated, Refs, Seeded, accounts
from benchmarks.support import bench_redis, migrated_clients, namespace, remove_keys
from calsync.core.config.settings import Settings
from calsync.core.drift.sweep import SweepParts, run_sweep
from calsync.core.model.calendar import Account, EventState, Provider
from calsync.core.model.change import EventFields
from calsync.core.store import accounts as account_store
from calsync.core.store import events, targets
from calsync.core.store.targets import TargetKey
from calsync.core.traffic import TrafficGate, TrafficStore, provider_limits
from calsync.providers.registry import ProviderRegistry

#: Starts the seeded emulator for these events: (its process, what it hands back).
Start = Callable[[list[EventState]], tuple[Any, Seeded]]


@dataclass(frozen=True)
class Whole:
    """A seeded emulator and database, and the sweep of one account through the job."""

    child: Any
    seeded: Seeded
    states: list[EventState]
    provider: Provider
    accounts: list[Account]
    sweep_one: Callable[[Account, bool], tuple[int, int, bool]]


@contextlib.contextmanager
def whole_sweeps(args: argparse.Namespace, scratch: Path, emulated: Emulated, start: Start,
                 event: Callable[[int], EventState]) -> Iterator[Whole]:  # fmt: skip
    """Seed the database and the emulator (module docstring); yields the parts, removes the keys afterwards."""
    with bench_redis(args.redis_url, scratch) as redis_url:
        ns = namespace("drift")
        settings = Settings(data_dir=scratch, broker_url=redis_url, redis_namespace=ns, log_level="ERROR",
                            database_url=f"sqlite:///{scratch / 'calsync.sqlite3'}",
                            secret_key=Fernet.generate_key().decode(),
                            provider_rate={"google": 0.0, "graph": 0.0, "exchange": 0.0})  # fmt: skip
        clients = migrated_clients(settings)
        try:
            states = _events(clients.db, [event(m) for m in range(args.events)])
            child, seeded = start(states)
            registry = ProviderRegistry(settings.model_copy(update=emulated.settings(seeded)))
            made = accounts(emulated, emulated.control(seeded.url), args.accounts)
            _synced(clients, made, states, seeded.refs)
            traffic = TrafficGate(TrafficStore(clients.redis, clients.keys), provider_limits(settings, lease=60))
            parts = SweepParts(clients.db, clients.cipher, registry, clients.broker, settings.queue, traffic)

            def sweep_one(account: Account, full: bool) -> tuple[int, int, bool]:
                result = run_sweep(parts, account.id)
                if result.skipped is not None:
                    raise RuntimeError(f"the sweep of {account.id} read nothing: {result.skipped}")
                return result.verified, len(result.findings), result.full

            yield Whole(child, seeded, states, registry.get(emulated.adapter), made, sweep_one)
        finally:
            clients.close()
            remove_keys(redis_url, ns)


def _events(db: Any, wanted: list[EventState]) -> list[EventState]:
    """The events stored at version 1, as the store gives them back (what the sweep's fingerprints start from)."""
    with db.write() as conn:
        for state in wanted:
            fields = EventFields(title=state.title, time_zone=state.time_zone, all_day=state.all_day,
                                 start=state.start, end=state.end, location=state.location,
                                 description=state.description, attendees=state.attendees)  # fmt: skip
            events.insert_event(conn, TENANT, state.id, fields, "none")
    with db.read() as conn:
        return [cast(EventState, events.get_event(conn, TENANT, state.id)) for state in wanted]


def _synced(clients: Any, made: list[Account], states: list[EventState], refs: Refs) -> None:
    """The accounts stored, each one's targets synced at version 1 with the ids and etags the emulator gave."""
    now = dt.datetime.now(dt.UTC)
    for account, account_refs in zip(made, refs, strict=True):
        with clients.db.write() as conn:
            account_store.add_account(conn, tenant_id=TENANT, provider=account.provider, address=account.address,
                                      credentials=clients.cipher.encrypt(dict(account.credentials)),
                                      options=dict(account.options), account_id=account.id)  # fmt: skip
            keys = [TargetKey(TENANT, state.id, account.id) for state in states]
            targets.plan_targets(conn, [(key, "present") for key in keys], version=1, due_at=now, existing=())
            for key, (external_id, etag) in zip(keys, account_refs, strict=True):
                targets.record_synced(conn, key, version=1, external_id=external_id, etag=etag,
                                      final_status="synced")  # fmt: skip
