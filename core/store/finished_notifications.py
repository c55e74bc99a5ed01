"""Webhook notifications whose every delivery is finished: the condition, and pruning them with their deliveries.

A notification is *finished* once it was dispatched (its delivery rows exist) and none of its deliveries
is ``pending``: each was ``delivered`` or ``failed`` (dead-lettered, or closed because its endpoint went).
The maintenance pass prunes it with its deliveries once nothing about it changed for ``WEBHOOK_RETENTION``
seconds (dispatched and every delivery last updated before then), except while a dead letter of kind
``webhook`` naming it is open: ``calsync dlq replay`` makes that delivery row pending again, so the row must
still be there. An undispatched notification is never pruned (the reconciler still owes its dispatch).
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import ColumnElement, Connection, and_, delete, exists, not_, or_, select

from calsync.core.model.vocabulary import PrunedTable
from calsync.core.store.schema import dead_letters as dl
from calsync.core.store.schema import webhook_deliveries as d
from calsync.core.store.schema import webhook_notifications as n


def _open_dead_letter_ids() -> ColumnElement[bool]:
    # Notification ids named by an open webhook dead letter. A NOT IN over an uncorrelated subquery: both
    # backends build it once per statement (a hash or an ephemeral index), however many rows are scanned.
    named = dl.c.payload["notification_id"].as_string()
    open_ids = select(named).where(dl.c.status == "open", dl.c.kind == "webhook", named.is_not(None))
    return n.c.id.not_in(open_ids)


def _prunable(before: dt.datetime) -> ColumnElement[bool]:
    # dispatched_at < before: never true of an undispatched row (NULL); it leads the (dispatched_at,
    # created_at) index, and implies created_at < before.
    # OFFSET 0 keeps PostgreSQL from flattening this into an anti-join, which it would plan as one scan of
    # every recent delivery per batch (their count is the whole retention's); checked row by row instead,
    # each candidate costs one primary-key range read, as SQLite does anyway.
    unfinished = exists(
        select(d.c.notification_id)
        .where(d.c.notification_id == n.c.id, or_(d.c.status == "pending", d.c.updated_at >= before))
        .offset(0)
    )
    return and_(n.c.dispatched_at < before, not_(unfinished), _open_dead_letter_ids())


def prune_finished(conn: Connection, limit: int, *, before: dt.datetime) -> dict[PrunedTable, int]:
    """Delete up to ``limit`` finished notifications unchanged since ``before``: the rows deleted, by table.

    The notifications are locked first (``FOR UPDATE`` on PostgreSQL; SQLite's writer lock otherwise).
    A delivery becomes pending again only by a replay of its open dead letter (never picked here) or
    by a dispatch (which claims an undispatched notification, never picked either); the deletes check
    it once more, so a row that turned pending meanwhile is kept with its notification.
    """
    picked = list(conn.execute(
        select(n.c.id).where(_prunable(before)).order_by(n.c.dispatched_at).limit(limit).with_for_update(of=n)
    ).scalars())  # fmt: skip
    if not picked:
        return {"webhook_notifications": 0, "webhook_deliveries": 0}
    deliveries = int(conn.execute(delete(d).where(d.c.notification_id.in_(picked), d.c.status != "pending")).rowcount)
    left = exists().where(d.c.notification_id == n.c.id)
    notifications = int(conn.execute(delete(n).where(n.c.id.in_(picked), not_(left))).rowcount)
    return {"webhook_notifications": notifications, "webhook_deliveries": deliveries}
