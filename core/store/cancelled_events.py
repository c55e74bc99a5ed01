"""Cancelled events once every target is gone: the condition that says so, and pruning them after retention.

An event is *removed everywhere* when it is cancelled and none of its targets is in any status but
``deleted`` (an event with no target at all counts too): workers ask ``targets.all_deleted`` after each
delete of a cancelled event's target. The maintenance pass prunes such events, once nothing about
them changed for ``CANCELLED_EVENT_RETENTION`` seconds, with their targets and their idempotency records.
A cancelled event with a failed target (its delete is in the DLQ) is kept: something may still be live.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence

from sqlalchemy import ColumnElement, Connection, and_, delete, exists, not_, or_, select, tuple_

from calsync.core.model.payload import idempotency_key, verification_key
from calsync.core.model.vocabulary import PrunedTable
from calsync.core.store.schema import event_targets as t
from calsync.core.store.schema import events as e
from calsync.core.store.schema import idempotency_records as r

_KEYS_PER_STATEMENT = 500  # an IN list of primary keys: each one an index lookup


def _prunable(before: dt.datetime) -> ColumnElement[bool]:
    # Removed everywhere, and nothing about the event or any target changed since ``before``.
    changed_since = exists().where(
        t.c.tenant_id == e.c.tenant_id,
        t.c.event_id == e.c.id,
        or_(t.c.status != "deleted", t.c.updated_at >= before),
    )
    return and_(e.c.status == "cancelled", e.c.updated_at < before, not_(changed_since))


def _record_keys(tenant_id: str, event_id: str, account: str, version: int) -> list[str]:
    # Every key a job of this event in this account can have recorded: one create, one update and one delete (and
    # its re-run) per version. A repair's key names its job: it expires by its TTL.
    keys = [idempotency_key(tenant_id, event_id, account, "create", 1)]
    for n in range(1, version + 1):
        keys.append(idempotency_key(tenant_id, event_id, account, "update", n))
        delete = idempotency_key(tenant_id, event_id, account, "delete", n)
        keys += (delete, verification_key(delete))
    return keys


def chunks(items: Sequence[str]) -> Iterable[Sequence[str]]:
    """``items`` in slices of :data:`_KEYS_PER_STATEMENT`: the IN lists of one statement each."""
    for start in range(0, len(items), _KEYS_PER_STATEMENT):
        yield items[start : start + _KEYS_PER_STATEMENT]


def prune_cancelled(conn: Connection, limit: int, *, before: dt.datetime) -> dict[PrunedTable, int]:
    """Delete up to ``limit`` prunable events with their targets and records: the rows deleted, by table.

    The events are locked first (``FOR UPDATE`` on PostgreSQL; SQLite's writer lock otherwise), so a
    change to the event either commits first (the event no longer qualifies) or, on PostgreSQL, when
    it read the event just before, fails once on the vanished row; retried, it creates the event anew
    at version 1, and no record of the old one is left to be mistaken for its own.
    """
    picked = conn.execute(
        select(e.c.tenant_id, e.c.id, e.c.version).where(_prunable(before)).order_by(e.c.updated_at).limit(limit)
        .with_for_update()
    ).all()  # fmt: skip
    if not picked:
        return dict.fromkeys(("events", "event_targets", "idempotency_records"), 0)
    versions = {(tenant, event): version for tenant, event, version in picked}
    ids = list(versions)
    by_event = tuple_(t.c.tenant_id, t.c.event_id).in_(ids)
    targets = conn.execute(select(t.c.tenant_id, t.c.event_id, t.c.account_id).where(by_event)).all()
    keys = [
        key
        for tenant, event, account in targets
        for key in _record_keys(tenant, event, account, versions[tenant, event])
    ]
    records = 0
    for chunk in chunks(keys):
        records += int(conn.execute(delete(r).where(r.c.key.in_(chunk))).rowcount)
    pruned_targets = int(conn.execute(delete(t).where(by_event)).rowcount)
    pruned_events = int(conn.execute(delete(e).where(tuple_(e.c.tenant_id, e.c.id).in_(ids))).rowcount)
    return {"events": pruned_events, "event_targets": pruned_targets, "idempotency_records": records}
