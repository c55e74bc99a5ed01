"""Repository of ``webhook_notifications``: the outbox, written in the transaction of what it reports.

A notification's id is its stable ``webhook-id`` (:func:`~core.model.webhooks.notification_id`), so
recording it twice (a retried sync, a replayed dead letter) keeps the first row: the insert does nothing
on conflict. ``dispatched_at`` is set once its delivery rows exist; the reconciler dispatches the rows
whose enqueue was lost.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, select, update

from calsync.core.model.vocabulary import WebhookEventType
from calsync.core.store.database import upsert_insert
from calsync.core.store.direct import DirectStatement, DirectTransaction
from calsync.core.store.schema import webhook_notifications as n


@dataclass(frozen=True)
class Notification:
    """One outbox row."""

    id: str
    tenant_id: str
    event_type: WebhookEventType
    payload: dict[str, Any]
    created_at: dt.datetime
    dispatched_at: dt.datetime | None


_INSERTS: dict[str, DirectStatement] = {}


def _insert(dialect: str) -> Any:
    return upsert_insert(n, dialect).on_conflict_do_nothing(index_elements=[n.c.id])


def _direct_insert(dialect: str) -> DirectStatement:
    statement = _INSERTS.get(dialect)
    if statement is None:
        statement = _INSERTS[dialect] = DirectStatement(_insert(dialect))
    return statement


def _values(
    notification_id: str, tenant_id: str, event_type: WebhookEventType, payload: dict[str, Any]
) -> dict[str, Any]:
    return {"id": notification_id, "tenant_id": tenant_id, "event_type": event_type, "payload": payload,
            "created_at": dt.datetime.now(dt.UTC), "dispatched_at": None}  # fmt: skip


def record(
    tx: DirectTransaction, notification_id: str, tenant_id: str, event_type: WebhookEventType, payload: dict[str, Any]
) -> None:
    """Add a notification inside the hot path's transaction (one statement; nothing if it is recorded already)."""
    tx.execute(_direct_insert(tx.dialect.name), _values(notification_id, tenant_id, event_type, payload))


def record_on(
    conn: Connection, notification_id: str, tenant_id: str, event_type: WebhookEventType, payload: dict[str, Any]
) -> None:
    """:func:`record` inside a SQLAlchemy transaction (the DLQ recorder's)."""
    conn.execute(_insert(conn.dialect.name).values(**_values(notification_id, tenant_id, event_type, payload)))


def _notification(row: Any) -> Notification:
    return Notification(row.id, row.tenant_id, row.event_type, row.payload, row.created_at, row.dispatched_at)


def get(conn: Connection, notification_id: str) -> Notification | None:
    """One notification, or None."""
    row = conn.execute(select(n).where(n.c.id == notification_id)).first()
    return _notification(row) if row else None


def undispatched(conn: Connection, *, before: dt.datetime, limit: int) -> list[str]:
    """Ids of notifications recorded before ``before`` whose deliveries were never created (lost enqueues)."""
    query = (
        select(n.c.id).where(n.c.dispatched_at.is_(None), n.c.created_at < before).order_by(n.c.created_at).limit(limit)
    )
    return [row.id for row in conn.execute(query)]


def claim_dispatch(conn: Connection, notification_id: str) -> bool:
    """Mark it dispatched (its delivery rows are created in this transaction); False if another dispatch did."""
    claimed = update(n).where(n.c.id == notification_id, n.c.dispatched_at.is_(None))
    return bool(conn.execute(claimed.values(dispatched_at=dt.datetime.now(dt.UTC))).rowcount)


def find(conn: Connection, *, tenant_id: str | None = None, event_type: str | None = None) -> list[Notification]:
    """Notifications (of a tenant, of a type), oldest first (tests and support)."""
    query = select(n).order_by(n.c.created_at, n.c.id)
    if tenant_id is not None:
        query = query.where(n.c.tenant_id == tenant_id)
    if event_type is not None:
        query = query.where(n.c.event_type == event_type)
    return [_notification(row) for row in conn.execute(query)]
