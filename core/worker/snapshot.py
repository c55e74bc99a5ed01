"""The state one sync job is about (account, event, target, is its effect done?), read in one query.

Before the lock, :func:`load_versions` reads only the versions (the event's, and the target's wanted
and synced ones) and the idempotency record by primary key, so a stale or finished job is dropped
without touching the lock; versions only grow, so a job that is stale by this read stays stale.

The full snapshot runs once per delivery, under the target's lock, on the hot path's direct driver access
(core/store/direct.py): the account joined to the event, the target and the job's idempotency
record. The job decides from this one read whether its effect is done, whether it is stale, and
what to do. When the account does not exist the join yields nothing and the parts are read one by
one, so the job can say precisely what is missing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, bindparam, select

from calsync.core.model.calendar import Account, EventState
from calsync.core.model.payload import JobPayload
from calsync.core.store import accounts, events, idempotency, targets
from calsync.core.store.crypto import CredentialCipher
from calsync.core.store.database import Database
from calsync.core.store.direct import DirectStatement
from calsync.core.store.schema import event_targets, idempotency_records, provider_accounts
from calsync.core.store.schema import events as events_table
from calsync.core.store.targets import TargetKey, TargetRow

_BOOKKEEPING = ("created_at", "updated_at")  # of accounts and events: not needed by a job
_PARTS = {
    "a": [column for column in provider_accounts.columns if column.name not in _BOOKKEEPING],
    "e": [column for column in events_table.columns if column.name not in _BOOKKEEPING],
    "t": list(event_targets.columns),
}
_PRESENT = {"a": "a_id", "e": "e_id", "t": "t_account_id"}  # never NULL in a row that exists
_LABELS = {prefix: tuple((f"{prefix}_{c.name}", c.name) for c in columns) for prefix, columns in _PARTS.items()}
_DONE = idempotency.succeeded_condition("k_idempotency", "k_now")
_JOINED = (
    select(
        *(column.label(f"{prefix}_{column.name}") for prefix, columns in _PARTS.items() for column in columns),
        idempotency_records.c.key.label("done_key"),
    )
    .select_from(provider_accounts)
    .outerjoin(
        events_table,
        and_(events_table.c.tenant_id == bindparam("k_tenant"), events_table.c.id == bindparam("k_event")),
    )
    .outerjoin(
        event_targets,
        and_(
            event_targets.c.tenant_id == bindparam("k_tenant"),
            event_targets.c.event_id == bindparam("k_event"),
            event_targets.c.account_id == provider_accounts.c.id,
        ),
    )
    .outerjoin(idempotency_records, _DONE)
    .where(provider_accounts.c.id == bindparam("k_account"))
)
_SNAPSHOT = DirectStatement(_JOINED)
_VERSIONS = DirectStatement(
    select(
        events_table.c.version,
        event_targets.c.wanted_version,
        event_targets.c.synced_version,
        idempotency_records.c.key.label("done_key"),
    )
    .select_from(event_targets)
    .join(
        events_table,
        and_(events_table.c.tenant_id == event_targets.c.tenant_id, events_table.c.id == event_targets.c.event_id),
    )
    .outerjoin(idempotency_records, _DONE)
    .where(
        event_targets.c.tenant_id == bindparam("k_tenant"),
        event_targets.c.event_id == bindparam("k_event"),
        event_targets.c.account_id == bindparam("k_account"),
    )
)


@dataclass(frozen=True)
class Versions:
    """How far one target is: its event's latest version, the version it must reach and the one it reached."""

    event: int
    wanted: int
    synced: int
    done: bool  # the job's idempotency key is recorded as succeeded


@dataclass(frozen=True)
class Snapshot:
    """The account, event and target a job is about."""

    account: Account | None
    event: EventState | None
    target: TargetRow | None
    already_done: bool = False  # the job's idempotency key is recorded as succeeded

    @property
    def versions(self) -> Versions | None:
        """The target's versions as :func:`load_versions` reads them (None if the event or target is missing)."""
        if self.event is None or self.target is None:
            return None
        target = self.target
        return Versions(self.event.version, target.wanted_version, target.synced_version, done=self.already_done)


def load_versions(db: Database, payload: JobPayload) -> Versions | None:
    """Read the target's versions by primary key (None if the event or target does not exist), without a lock."""
    with db.direct_read() as tx:
        row = tx.first(_VERSIONS, _params(payload))
    if row is None:
        return None
    return Versions(row["version"], row["wanted_version"], row["synced_version"], done=row["done_key"] is not None)


def _params(payload: JobPayload) -> dict[str, Any]:
    return {
        "k_tenant": payload.tenant_id,
        "k_event": payload.entity_id,
        "k_account": payload.account_id,
        "k_idempotency": payload.idempotency_key,
        "k_now": dt.datetime.now(dt.UTC),
    }


def _part(row: Mapping[str, Any], prefix: str) -> dict[str, Any] | None:
    if row[_PRESENT[prefix]] is None:
        return None
    return {name: row[label] for label, name in _LABELS[prefix]}


def load_snapshot(db: Database, cipher: CredentialCipher, payload: JobPayload) -> Snapshot:
    """Read the latest state a job needs, in one statement."""
    with db.direct_read() as tx:
        row = tx.first(_SNAPSHOT, _params(payload))
    if row is None:
        return _without_account(db, payload)
    account, event, target = _part(row, "a"), _part(row, "e"), _part(row, "t")
    assert account is not None
    return Snapshot(
        account=accounts.account_from_row(account, cipher),
        event=events.event_from_row(event) if event else None,
        target=targets.target_from_row(target) if target else None,
        already_done=row["done_key"] is not None,
    )


def _without_account(db: Database, payload: JobPayload) -> Snapshot:
    with db.read() as conn:
        return Snapshot(
            account=None,
            event=events.get_event(conn, payload.tenant_id, payload.entity_id),
            target=targets.get_target(conn, TargetKey(payload.tenant_id, payload.entity_id, payload.account_id)),
            already_done=idempotency.succeeded(conn, payload.idempotency_key),
        )
