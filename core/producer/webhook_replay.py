"""Replaying a dead-lettered webhook delivery: the same notification, so the same ``webhook-id``.

A record of kind ``webhook`` names its (notification, endpoint): the delivery row is made pending again
with a fresh schedule, in the transaction that closes the record, then its message is enqueued (a lost
enqueue leaves the row due, for the reconciler). An endpoint that is disabled or gone is refused: enable
it first. A webhook actor that crashed (a record of kind ``job``) is enqueued again as it was.
"""

from __future__ import annotations

from typing import Any

from calsync.core.messaging.messages import (
    DELIVER_WEBHOOK_JOB,
    DISPATCH_WEBHOOK_JOB,
    webhook_delivery_message,
    webhook_dispatch_message,
)
from calsync.core.model.ids import new_id
from calsync.core.runtime import Runtime
from calsync.core.store import dead_letters, webhook_deliveries, webhook_endpoints
from calsync.core.store.dead_letters import DeadLetter

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


def replay_webhook(runtime: Runtime, record: DeadLetter) -> tuple[str | None, dict[str, object] | None]:
    """Replay one webhook record: (why it was skipped, None) or (None, the replayed entry)."""
    target = _target(record)
    if target is None:
        return "its payload names no webhook delivery; discard it", None
    notification_id, endpoint_id = target
    queue = runtime.settings.webhook_queue
    replay_id = new_id("whd")
    with runtime.db.write() as conn:
        if endpoint_id is not None:
            endpoint = webhook_endpoints.get(conn, endpoint_id)
            if endpoint is None:
                return f"webhook endpoint {endpoint_id} was removed; discard it", None
            if endpoint.status != "enabled":
                return f"webhook endpoint {endpoint_id} is disabled; enable it first", None
        if not dead_letters.mark_replayed(conn, record.id, replay_job_id=replay_id):
            return "record is no longer open", None
        if endpoint_id is not None:
            webhook_deliveries.reopen(conn, notification_id, endpoint_id)
    message = (
        webhook_dispatch_message(queue, notification_id)
        if endpoint_id is None
        else webhook_delivery_message(queue, notification_id, endpoint_id)
    )
    try:
        runtime.broker.enqueue(message)
    except Exception:
        return None, {"id": record.id, "job_id": replay_id, "deferred": True}  # the row is due: the reconciler
    return None, {"id": record.id, "job_id": replay_id}
