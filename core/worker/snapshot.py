"""The state one sync job is about (account, event, target, is its effect done?), read in one query.

The snapshot is read before the target's lock, in one statement: the account, the event, the target and the
job's idempotency record, each outer-joined to one constant row, so the statement always yields one row and a
part that does not exist reads as NULLs (the job then says precisely what is missing).
A stale or finished job is dropped by this read without touching the lock; versions only grow, so a job
that is stale by it stays stale.

Whether that read is still good once the lock is taken, :func:`still_current` tells from the lock's
handover (core/redis/locks.py): what the lock's last holder left the target as. Only two columns ever
change under the lock, and each only one way: ``synced_version`` grows with every recorded sync and
``create_attempted`` turns true once (:func:`left_as`). A handover equal to the early read's, or none kept
(no holder in the last ``HANDOVER_TTL``: it expired, or Redis lost it with the locks themselves), means
no holder wrote since the read; otherwise, or after a takeover, the job reads the snapshot again under
the lock (docs/notes/locks.md, "One read per job").
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, bindparam, literal, select

from calsync.core.model.calendar import Account, EventState
from calsync.core.model.payload import JobPayload
from calsync.core.store import accounts, events, idempotency, targets
from calsync.core.store.crypto import CredentialCipher
from calsync.core.store.database import Database
from calsync.core.store.schema import event_targets, idempotency_records, provider_accounts
from calsync.core.store.schema import events as events_table
from calsync.core.store.targets import TargetRow

_BOOKKEEPING = ("created_at", "updated_at")  # of accounts and events: not needed by a job
_PARTS = {
    "a": [column for column in provider_accounts.columns if column.name not in _BOOKKEEPING],
    "e": [column for column in events_table.columns if column.name not in _BOOKKEEPING],
    "t": list(event_targets.columns),
}
# Each part's place in the row, read by position (cheaper than by label): where its columns start, their names, and
# where its column that is never NULL in a row that exists is.
_NAMES = {prefix: tuple(column.name for column in columns) for prefix, columns in _PARTS.items()}
_STARTS = {prefix: sum(len(columns) for columns in list(_PARTS.values())[:n]) for n, prefix in enumerate(_PARTS)}
_PRESENT_AT = {prefix: _STARTS[prefix] + _NAMES[prefix].index(name)
               for prefix, name in {"a": "id", "e": "id", "t": "account_id"}.items()}  # fmt: skip
_DONE = idempotency.succeeded_condition("k_idempotency", "k_now")
_ONE_ROW = select(literal(1).label("one")).subquery()  # what every part is outer-joined to
_JOINED = (
    select(
        *(column.label(f"{prefix}_{column.name}") for prefix, columns in _PARTS.items() for column in columns),
        idempotency_records.c.key.label("done_key"),
    )
    .select_from(_ONE_ROW)
    .outerjoin(provider_accounts, provider_accounts.c.id == bindparam("k_account"))
    .outerjoin(
        events_table,
        and_(events_table.c.tenant_id == bindparam("k_tenant"), events_table.c.id == bindparam("k_event")),
    )
    .outerjoin(
        event_targets,
        and_(
            event_targets.c.tenant_id == bindparam("k_tenant"),
            event_targets.c.event_id == bindparam("k_event"),
            event_targets.c.account_id == bindparam("k_account"),
        ),
    )
    .outerjoin(idempotency_records, _DONE)
)


@dataclass(frozen=True)
class Snapshot:
    """The account, event and target a job is about."""

    account: Account | None
    event: EventState | None
    target: TargetRow | None
    already_done: bool = False  # the job's idempotency key is recorded as succeeded


def left_as(target: TargetRow) -> str:
    """What a lock holder leaves the target as, kept in the lock's handover for the next job to compare."""
    return f"{target.synced_version}:{int(target.create_attempted)}"


def still_current(early: Snapshot, handed_over: str | None, *, taken_over: bool) -> bool:
    """Whether a snapshot read before the lock is as good as one read under it: no holder wrote since."""
    if taken_over or handed_over is None or early.account is None or early.event is None or early.target is None:
        return False
    return handed_over in ("", left_as(early.target))


def _params(payload: JobPayload) -> dict[str, Any]:
    return {
        "k_tenant": payload.tenant_id,
        "k_event": payload.entity_id,
        "k_account": payload.account_id,
        "k_idempotency": payload.idempotency_key,
        "k_now": dt.datetime.now(dt.UTC),
    }


def _part(row: Sequence[Any], prefix: str) -> dict[str, Any] | None:
    if row[_PRESENT_AT[prefix]] is None:
        return None
    start, names = _STARTS[prefix], _NAMES[prefix]
    return dict(zip(names, row[start : start + len(names)], strict=True))


def load_snapshot(db: Database, cipher: CredentialCipher, payload: JobPayload) -> Snapshot:
    """Read the latest state a job needs, in one statement."""
    with db.autocommit() as conn:  # one statement: one snapshot, one round trip
        row = conn.execute(_JOINED, _params(payload)).one()
    account, event, target = _part(row, "a"), _part(row, "e"), _part(row, "t")
    return Snapshot(
        account=accounts.account_from_row(account, cipher) if account else None,
        event=events.event_from_row(event) if event else None,
        target=targets.TargetRow(**target) if target else None,
        already_done=row[-1] is not None,  # done_key, the last column
    )
