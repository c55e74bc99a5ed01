"""Webhook work sent again: a dead letter replayed (``calsync dlq replay``), what the broker lost (the reconciler).

**Replay.** The same notification, so the same ``webhook-id``. A record of kind ``webhook`` names its
(notification, endpoint): the delivery row is made pending again with a fresh schedule, in the
transaction that closes the record, then its message is enqueued (a lost enqueue leaves the row due, for
the reconciler). An endpoint that is disabled or gone is refused: enable it first. A webhook actor that
crashed (a record of kind ``job``) is enqueued again as it was.

**Reconcile.** A notification is committed with what it reports and its dispatch is enqueued after the
commit; a delivery row holds its next due time before its message is enqueued. So a notification still
undispatched, or a pending delivery overdue, by ``RECONCILE_AFTER`` has no live message: enqueue it again.
Duplicates cost at most a second request with the same ``webhook-id`` (receivers deduplicate on it).
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import dramatiq

from calsync.core.messaging.messages import (
    DELIVER_WEBHOOK_JOB,
    DISPATCH_WEBHOOK_JOB,
    webhook_delivery_message,
    webhook_dispatch_message,
)
from calsync.core.model.ids import new_id
from calsync.core.store import dead_letters
from calsync.core.store.database import Database
from calsync.core.store.dead_letters import DeadLetter
from calsync.core.webhooks import store

log = logging.getLogger(__name__)

WEBHOOK_JOBS = (DISPATCH_WEBHOOK_JOB, DELIVER_WEBHOOK_JOB)


def _target(record: DeadLetter) -> tuple[str, str | None] | None:
    # (notification id, endpoint id or None for a dispatch), from either kind of record.
    payload: Any = record.payload
    if isinstance(payload, dict) and "notification_id" in payload:
        return str(payload["notification_id"]), payload.get("endpoint_id")
    if record.job_type == DISPATCH_WEBHOOK_JOB and isinstance(payload, str):
        return payload, None  # a dispatch of one notification (several: the reconciler takes them)
    args = payload.get("args") if isinstance(payload, dict) else None
    if record.job_type == DELIVER_WEBHOOK_JOB and isinstance(args, list) and len(args) == 2:
        return str(args[0]), str(args[1])
    return None


def replay_webhook(db: Database, broker: dramatiq.Broker, queue: str, record: DeadLetter) -> dict[str, object] | str:
    """Replay one webhook record: the replayed entry, or why it was skipped."""
    target = _target(record)
    if target is None:
        return "its payload names no webhook delivery; discard it"
    notification_id, endpoint_id = target
    replay_id = new_id("whd")
    with db.write() as conn:
        if endpoint_id is not None:
            endpoint = store.get_endpoint(conn, endpoint_id)
            if endpoint is None:
                return f"webhook endpoint {endpoint_id} was removed; discard it"
            if endpoint.status != "enabled":
                return f"webhook endpoint {endpoint_id} is disabled; enable it first"
        if not dead_letters.mark_replayed(conn, record.id, replay_job_id=replay_id):
            return "record is no longer open"
        if endpoint_id is not None:
            store.reopen_delivery(conn, notification_id, endpoint_id)
    message = (
        webhook_dispatch_message(queue, notification_id)
        if endpoint_id is None
        else webhook_delivery_message(queue, notification_id, endpoint_id)
    )
    try:
        broker.enqueue(message)
    except Exception:
        return {"id": record.id, "job_id": replay_id, "deferred": True}  # the row is due: the reconciler
    return {"id": record.id, "job_id": replay_id}


def reconcile_webhooks(db: Database, broker: dramatiq.Broker, queue: str, *, before: dt.datetime, limit: int) -> int:
    """Re-enqueue lost dispatches and deliveries older than ``before``; how many were enqueued."""
    with db.read() as conn:
        lost = [webhook_dispatch_message(queue, n) for n in store.undispatched(conn, before=before, limit=limit)]
        overdue = store.overdue_deliveries(conn, before=before, limit=limit)
    lost += [webhook_delivery_message(queue, d.notification_id, d.endpoint_id) for d in overdue]
    enqueued = 0
    for message in lost:
        try:
            broker.enqueue(message)
        except Exception:
            log.exception("reconciler could not enqueue %s", message.actor_name)
            continue
        if message.actor_name == DELIVER_WEBHOOK_JOB:  # not overdue again before its next attempt could be
            notification_id, endpoint_id = message.args
            with db.write() as conn:
                store.postpone_delivery(conn, notification_id, endpoint_id, due_at=dt.datetime.now(dt.UTC))
        enqueued += 1
    return enqueued
