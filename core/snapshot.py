"""The state one sync job is about (account, event, target), read together in one query.

This runs once per job, under the target's lock, so it is one round trip: the account joined to the
event and the target. When the account does not exist the join yields nothing and the parts are read
one by one, so the job can say precisely what is missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, and_, bindparam, select

from core.payload import JobPayload
from core.store import accounts, events, targets
from core.store.schema import event_targets, provider_accounts
from core.store.schema import events as events_table
from core.store.targets import TargetKey, TargetRow
from providers.base import Account, EventState

if TYPE_CHECKING:
    from core.runtime import Runtime

_PARTS = {"a": provider_accounts, "e": events_table, "t": event_targets}
_JOINED = (
    select(*(column.label(f"{prefix}_{column.name}") for prefix, table in _PARTS.items() for column in table.columns))
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
    .where(provider_accounts.c.id == bindparam("k_account"))
)


@dataclass(frozen=True)
class Snapshot:
    """The account, event and target a job is about."""

    account: Account | None
    event: EventState | None
    target: TargetRow | None


def _part(row: Mapping[Any, Any], prefix: str) -> dict[str, Any] | None:
    values = {column.name: row[f"{prefix}_{column.name}"] for column in _PARTS[prefix].columns}
    primary = _PARTS[prefix].primary_key.columns[0].name
    return values if values[primary] is not None else None


def read_snapshot(conn: Connection, runtime: Runtime, payload: JobPayload) -> Snapshot:
    """Read a job's state on an open connection."""
    params = {"k_tenant": payload.tenant_id, "k_event": payload.entity_id, "k_account": payload.account_id}
    row = conn.execute(_JOINED, params).mappings().first()
    if row is None:
        return Snapshot(
            account=None,
            event=events.get_event(conn, payload.tenant_id, payload.entity_id),
            target=targets.get_target(conn, TargetKey(payload.tenant_id, payload.entity_id, payload.account_id)),
        )
    account, event, target = _part(row, "a"), _part(row, "e"), _part(row, "t")
    assert account is not None
    return Snapshot(
        account=accounts.account_from_row(account, runtime.cipher),
        event=events.event_from_row(event) if event else None,
        target=targets.target_from_row(target) if target else None,
    )


def load_snapshot(runtime: Runtime, payload: JobPayload) -> Snapshot:
    """Read the latest state a job needs in one short transaction."""
    with runtime.db.read() as conn:
        return read_snapshot(conn, runtime, payload)
