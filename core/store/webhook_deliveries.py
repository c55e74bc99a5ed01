"""Repository of ``webhook_deliveries``: one row per (notification, endpoint), created once, then updated.

The row is the intent: it exists before its message is enqueued, and a ``pending`` row whose
``next_attempt_at`` is long past was lost by the broker (the reconciler enqueues it again). Attempts
are counted here, not in the message, so a redelivered message cannot restart the schedule.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, delete, func, select, update

from calsync.core.model.vocabulary import WebhookDeliveryStatus
from calsync.core.store.database import upsert_insert
from calsync.core.store.schema import webhook_deliveries as d


@dataclass(frozen=True)
class Delivery:
    """One (notification, endpoint) delivery."""

    notification_id: str
    endpoint_id: str
    status: WebhookDeliveryStatus
    attempts: int
    last_status_code: int | None
    last_error: str | None
    next_attempt_at: dt.datetime | None


def _delivery(row: Any) -> Delivery:
    return Delivery(row.notification_id, row.endpoint_id, row.status, row.attempts, row.last_status_code,
                    row.last_error, row.next_attempt_at)  # fmt: skip


def _where(notification_id: str, endpoint_id: str) -> Any:
    return (d.c.notification_id == notification_id) & (d.c.endpoint_id == endpoint_id)


def create(conn: Connection, notification_id: str, endpoint_ids: Iterable[str]) -> None:
    """One pending row per endpoint, due now; rows that exist already are kept as they are."""
    now = dt.datetime.now(dt.UTC)
    rows = [{"notification_id": notification_id, "endpoint_id": e, "status": "pending", "attempts": 0,
             "next_attempt_at": now, "created_at": now, "updated_at": now} for e in endpoint_ids]  # fmt: skip
    if rows:
        insert = upsert_insert(d, conn.dialect.name)
        conn.execute(insert.on_conflict_do_nothing(index_elements=[d.c.notification_id, d.c.endpoint_id]), rows)


def pending_of(conn: Connection, notification_id: str) -> list[str]:
    """The endpoints a notification is still to be delivered to."""
    query = select(d.c.endpoint_id).where(d.c.notification_id == notification_id, d.c.status == "pending")
    return [row.endpoint_id for row in conn.execute(query.order_by(d.c.endpoint_id))]


def get(conn: Connection, notification_id: str, endpoint_id: str) -> Delivery | None:
    """One delivery, or None."""
    row = conn.execute(select(d).where(_where(notification_id, endpoint_id))).first()
    return _delivery(row) if row else None


def record_attempt(
    conn: Connection,
    notification_id: str,
    endpoint_id: str,
    *,
    status: WebhookDeliveryStatus,
    status_code: int | None,
    error: str | None,
    next_attempt_at: dt.datetime | None,
) -> bool:
    """Count one attempt of a pending delivery and what it gave; False when it is no longer pending."""
    result = conn.execute(
        update(d)
        .where(_where(notification_id, endpoint_id), d.c.status == "pending")
        .values(
            status=status, attempts=d.c.attempts + 1, last_status_code=status_code, last_error=error,
            next_attempt_at=next_attempt_at, updated_at=dt.datetime.now(dt.UTC),
        )
    )  # fmt: skip
    return bool(result.rowcount)


def close(conn: Connection, notification_id: str, endpoint_id: str, *, why: str) -> None:
    """End a pending delivery without an attempt (its endpoint is disabled or gone)."""
    conn.execute(
        update(d)
        .where(_where(notification_id, endpoint_id), d.c.status == "pending")
        .values(status="failed", last_error=why, next_attempt_at=None, updated_at=dt.datetime.now(dt.UTC))
    )


def reopen(conn: Connection, notification_id: str, endpoint_id: str) -> bool:
    """Make a failed delivery pending again with a fresh schedule (a DLQ replay); False if it is not failed."""
    now = dt.datetime.now(dt.UTC)
    result = conn.execute(
        update(d)
        .where(_where(notification_id, endpoint_id), d.c.status == "failed")
        .values(status="pending", attempts=0, next_attempt_at=now, updated_at=now)
    )
    return bool(result.rowcount)


def overdue(conn: Connection, *, before: dt.datetime, limit: int) -> list[Delivery]:
    """Pending deliveries whose next attempt was due before ``before``: their message was lost."""
    query = (
        select(d)
        .where(d.c.status == "pending", d.c.next_attempt_at < before)
        .order_by(d.c.next_attempt_at)
        .limit(limit)
    )
    return [_delivery(row) for row in conn.execute(query)]


def postpone(conn: Connection, notification_id: str, endpoint_id: str, *, due_at: dt.datetime) -> None:
    """The reconciler re-enqueued it: not overdue again before ``due_at``."""
    conn.execute(update(d).where(_where(notification_id, endpoint_id), d.c.status == "pending")
                 .values(next_attempt_at=due_at))  # fmt: skip


def remove_endpoint(conn: Connection, endpoint_id: str) -> int:
    """Delete every delivery of a removed endpoint."""
    return int(conn.execute(delete(d).where(d.c.endpoint_id == endpoint_id)).rowcount)


def count_by_status(conn: Connection) -> dict[str, int]:
    """Deliveries per status (``calsync status``)."""
    query = select(d.c.status, func.count()).group_by(d.c.status)
    return {status: int(count) for status, count in conn.execute(query)}
