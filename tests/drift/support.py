"""Helpers of the drift tests: accounts and synced events as a worker leaves them."""

from __future__ import annotations

import datetime as dt

from calsync.core.model.calendar import AccountStatus
from calsync.core.model.change import EventFields
from calsync.core.store import accounts, events, targets
from calsync.core.store.database import Database
from calsync.core.store.targets import TargetKey
from tests.support import plan_target

NOW = dt.datetime(2026, 12, 7, 17, 0, tzinfo=dt.UTC)
FIELDS = EventFields(title="Planning", start=dt.datetime(2026, 12, 8, 9, tzinfo=dt.UTC),
                     end=dt.datetime(2026, 12, 8, 10, tzinfo=dt.UTC))  # fmt: skip


def add_account(db: Database, account_id: str, *, tenant: str = "t", status: AccountStatus = "active") -> str:
    """A memory account of ``tenant`` in ``status``."""
    with db.write() as conn:
        accounts.add_account(conn, tenant_id=tenant, provider="memory", address=f"{account_id}@example.com",
                             credentials=None, options={}, account_id=account_id)  # fmt: skip
        if status != "active":
            accounts.update_account(conn, account_id, status=status)
    return account_id


def synced_event(db: Database, event_id: str, account_ids: list[str], *, tenant: str = "t") -> list[TargetKey]:
    """An event of ``tenant`` synced at version 1 to each account (external id ``x-<account>``)."""
    keys = [TargetKey(tenant, event_id, a) for a in account_ids]
    with db.write() as conn:
        events.insert_event(conn, tenant, event_id, FIELDS, "none")
        for key in keys:
            plan_target(conn, key, wanted="present", version=1, due_at=NOW)
            targets.record_synced(conn, key, version=1, external_id=f"x-{key.account_id}", etag='"1"',
                                  final_status="synced")  # fmt: skip
    return keys
