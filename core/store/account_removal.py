"""An account taken out of service (``calsync accounts remove``): what calsync still has in its calendar, and the
account's deletion once nothing is left there.

A target of the account is *left* while its status is not ``deleted``: the event is, or may be, in the calendar,
or its delete is still to run. The account row goes only when no target is left and none changed for the *quiet*
period (``DELETE_VERIFY_DELAY``: a delete that knew no provider id runs once more after it, and needs the account
to exist). With the row go its targets (all deleted) and their create keys, so an account registered later under
the same id creates its events afresh instead of finding their creates "already done".
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import ColumnElement, Connection, and_, delete, exists, func, literal, not_, or_, select

from calsync.core.model.payload import idempotency_key
from calsync.core.store.cancelled_events import chunks
from calsync.core.store.schema import event_targets as t
from calsync.core.store.schema import events as e
from calsync.core.store.schema import idempotency_records as r
from calsync.core.store.schema import provider_accounts as a


@dataclass(frozen=True)
class Left:
    """What calsync still has in an account's calendar."""

    targets: int  # targets not deleted: events there, or deletes still to run
    to_detach: int  # of which events still wanted there (not cancelled, the account among their targets)


_WANTED_THERE = and_(
    t.c.wanted == "present",
    t.c.status != "deleted",
    exists().where(e.c.tenant_id == t.c.tenant_id, e.c.id == t.c.event_id, e.c.status != "cancelled"),
)


def left_in(conn: Connection, account_id: str) -> Left:
    """Count the account's targets not deleted, and of those the ones an event still wants there (one query)."""
    mine = and_(t.c.account_id == account_id, t.c.status != "deleted")
    total, wanted = conn.execute(select(func.count(), func.count().filter(_WANTED_THERE)).where(mine)).one()
    return Left(int(total), int(wanted))


def events_to_detach(conn: Connection, account_id: str, *, after: str | None, limit: int) -> list[str]:
    """Ids of the events that still want the account among their targets, by id, from past ``after`` (a page)."""
    query = select(t.c.event_id).where(t.c.account_id == account_id, _WANTED_THERE, t.c.event_id > (after or ""))
    return list(conn.execute(query.order_by(t.c.event_id).limit(limit)).scalars())


def _busy(account: ColumnElement[str], quiet_since: dt.datetime) -> ColumnElement[bool]:
    # A target of the account is left, or one changed since ``quiet_since`` (a delete's re-run may still come).
    return exists().where(t.c.account_id == account, or_(t.c.status != "deleted", t.c.updated_at >= quiet_since))


def remove_if_done(conn: Connection, account_id: str, *, quiet_since: dt.datetime) -> bool:
    """Delete the account, its targets and their create keys when no target is left and none changed since
    ``quiet_since``; False (nothing deleted) otherwise.

    The account row is locked first (PostgreSQL; SQLite's writer lock otherwise): a change inserting a target
    for it either commits first (and is then left here) or fails on the vanished account.
    """
    tenant = conn.execute(select(a.c.tenant_id).where(a.c.id == account_id).with_for_update()).scalar()
    if tenant is None:
        return False
    if conn.execute(select(_busy(literal(account_id), quiet_since))).scalar():
        return False
    mine = t.c.account_id == account_id
    gone = [str(event) for event in conn.execute(select(t.c.event_id).where(mine)).scalars()]
    keys = [idempotency_key(tenant, event, account_id, "create", 1) for event in gone]
    for chunk in chunks(keys):
        conn.execute(delete(r).where(r.c.key.in_(chunk)))
    conn.execute(delete(t).where(mine, t.c.status == "deleted"))
    conn.execute(delete(a).where(a.c.id == account_id))
    return True


def removable(conn: Connection, *, quiet_since: dt.datetime, limit: int) -> list[str]:
    """Ids of accounts marked ``removing`` that :func:`remove_if_done` would delete now (the housekeeping pass)."""
    query = select(a.c.id).where(a.c.status == "removing", not_(_busy(a.c.id, quiet_since)))
    return list(conn.execute(query.order_by(a.c.updated_at).limit(limit)).scalars())
