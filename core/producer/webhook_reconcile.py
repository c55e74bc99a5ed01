"""The webhook half of the reconciler: outbox rows never dispatched, deliveries whose message was lost.

A notification is committed with what it reports and its dispatch is enqueued after the commit; a
delivery row holds its next due time before its message is enqueued. So a notification still
undispatched, or a pending delivery overdue, by ``RECONCILE_AFTER`` has no live message: enqueue it again.
Duplicates cost at most a second request with the same ``webhook-id`` (receivers deduplicate on it).
"""

from __future__ import annotations

import datetime as dt
import logging

from calsync.core.messaging.messages import webhook_delivery_message, webhook_dispatch_message
from calsync.core.runtime import Runtime
from calsync.core.store import webhook_deliveries, webhook_notifications

log = logging.getLogger(__name__)


def reconcile_webhooks(runtime: Runtime, *, before: dt.datetime, limit: int) -> int:
    """Re-enqueue lost dispatches and deliveries older than ``before``; how many were enqueued."""
    queue = runtime.settings.webhook_queue
    with runtime.db.read() as conn:
        lost = webhook_notifications.undispatched(conn, before=before, limit=limit)
        overdue = webhook_deliveries.overdue(conn, before=before, limit=limit)
    enqueued = 0
    for notification_id in lost:
        try:
            runtime.broker.enqueue(webhook_dispatch_message(queue, notification_id))
            enqueued += 1
        except Exception:
            log.exception("reconciler could not enqueue a webhook dispatch")
    for delivery in overdue:
        try:
            runtime.broker.enqueue(webhook_delivery_message(queue, delivery.notification_id, delivery.endpoint_id))
        except Exception:
            log.exception("reconciler could not enqueue a webhook delivery")
            continue
        with runtime.db.write() as conn:
            webhook_deliveries.postpone(conn, delivery.notification_id, delivery.endpoint_id,
                                        due_at=dt.datetime.now(dt.UTC))  # fmt: skip
        enqueued += 1
    return enqueued
