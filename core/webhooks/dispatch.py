"""A notification's fan-out: one delivery row per subscribed endpoint, then one ``deliver_webhook`` message each.

The endpoints are those enabled and subscribed when the notification is dispatched. The dispatch is
claimed in the transaction that creates the rows, so a duplicate dispatch message creates and enqueues
nothing: each (notification, endpoint) gets one delivery. A lost delivery message leaves its row pending
and due, for the reconciler.
"""

from __future__ import annotations

import logging

import dramatiq

from calsync.core.messaging.messages import webhook_delivery_message
from calsync.core.store import webhook_deliveries, webhook_endpoints, webhook_notifications
from calsync.core.store.database import Database

log = logging.getLogger(__name__)


def dispatch(db: Database, broker: dramatiq.Broker, queue: str, notification_id: str) -> list[str]:
    """Create the deliveries of a recorded notification and enqueue them; the endpoint ids enqueued."""
    with db.write() as conn:
        found = webhook_notifications.get(conn, notification_id)
        if found is None or not webhook_notifications.claim_dispatch(conn, notification_id):
            return []
        endpoints = [e.id for e in webhook_endpoints.subscribed(conn, found.tenant_id, found.event_type)]
        webhook_deliveries.create(conn, notification_id, endpoints)
    enqueue_deliveries(broker, queue, notification_id, endpoints)
    return endpoints


def enqueue_deliveries(broker: dramatiq.Broker, queue: str, notification_id: str, endpoint_ids: list[str]) -> None:
    """One message per delivery row; a failed enqueue waits for the reconciler."""
    for endpoint_id in endpoint_ids:
        try:
            broker.enqueue(webhook_delivery_message(queue, notification_id, endpoint_id))
        except Exception:
            log.warning("could not enqueue a webhook delivery; the reconciler will", exc_info=True,
                        extra={"fields": {"notification_id": notification_id, "endpoint_id": endpoint_id}})  # fmt: skip
