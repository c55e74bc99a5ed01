"""Building and enqueueing Dramatiq messages: the wire format other services send us.

A job is a Dramatiq message for actor ``sync_calendar_event`` on the configured queue, whose only
positional argument is the :class:`~core.model.payload.JobPayload` as JSON. Producers in other languages
can build the same message, or send a ``submit_change`` intake message (docs/PROTOCOL.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import dramatiq

from calsync.core.model.intake import INTAKE_JOB, IntakeMessage
from calsync.core.model.payload import SYNC_JOB, JobPayload, Operation, new_payload

RECONCILE_JOB = "reconcile"
# The webhook actors (queue CALSYNC_WEBHOOK_QUEUE): a notification's fan-out to its endpoints, one delivery.
DISPATCH_WEBHOOK_JOB = "dispatch_webhook"
DELIVER_WEBHOOK_JOB = "deliver_webhook"

#: Message option of a re-run of one target (a repair, a delete's verification): it runs even when its version
#: is synced already (core/worker/job.py).
REPAIR_OPTION = "repair"
# Options that describe one delivery and must not leak into the next one.
_DELIVERY_OPTIONS = ("eta", "redis_message_id", "traceback", "requeue_timestamp")


def sync_message(queue: str, payload: JobPayload, *, options: Mapping[str, Any] | None = None) -> dramatiq.Message[Any]:
    """A fresh message for a sync job."""
    return dramatiq.Message(
        queue_name=queue,
        actor_name=SYNC_JOB,
        args=(payload.to_message_arg(),),
        kwargs={},
        options=dict(options or {}),
    )


def rerun_message(
    queue: str, payload: JobPayload, operation: Operation, version: int, key: str
) -> dramatiq.Message[Any]:
    """A sync job running ``payload``'s target again, as ``operation`` of ``version`` under its own idempotency
    ``key``; marked with :data:`REPAIR_OPTION`."""
    again = new_payload(
        tenant_id=payload.tenant_id,
        entity_id=payload.entity_id,
        account_id=payload.account_id,
        operation=operation,
        version=version,
        trace_id=payload.trace_id,
        key=key,
    )
    return sync_message(queue, again, options={REPAIR_OPTION: True})


def intake_message(queue: str, intake: IntakeMessage, *, message_id: str | None = None) -> dramatiq.Message[Any]:
    """A ``submit_change`` message: what a Dramatiq-speaking service sends instead of calling the Python API.

    ``message_id`` keeps a resent message idempotent with its first sending (a DLQ replay).
    """
    message: dramatiq.Message[Any] = dramatiq.Message(
        queue_name=queue, actor_name=INTAKE_JOB, args=(intake.to_message_arg(),), kwargs={}, options={}
    )
    return message if message_id is None else message.copy(message_id=message_id)


def reconcile_message(queue: str) -> dramatiq.Message[Any]:
    """A message asking a worker to run the reconciler (what the Kubernetes CronJob sends)."""
    return dramatiq.Message(queue_name=queue, actor_name=RECONCILE_JOB, args=(), kwargs={}, options={})


def webhook_dispatch_message(queue: str, *notification_ids: str) -> dramatiq.Message[Any]:
    """Ask a worker to create notifications' deliveries (one per subscribed endpoint) and enqueue them."""
    return dramatiq.Message(
        queue_name=queue, actor_name=DISPATCH_WEBHOOK_JOB, args=notification_ids, kwargs={}, options={}
    )


def webhook_delivery_message(queue: str, notification_id: str, endpoint_id: str) -> dramatiq.Message[Any]:
    """One (notification, endpoint) delivery; its attempts are counted in its database row, not here."""
    return dramatiq.Message(
        queue_name=queue, actor_name=DELIVER_WEBHOOK_JOB, args=(notification_id, endpoint_id), kwargs={}, options={}
    )


def redelivery(
    message: Any,
    *,
    args: Iterable[Any] | None = None,
    options: Mapping[str, Any] | None = None,
) -> dramatiq.Message[Any]:
    """A copy of a message for a later delivery: same id, updated args/options, per-delivery options dropped."""
    kept = {k: v for k, v in message.options.items() if k not in _DELIVERY_OPTIONS}
    kept.update(options or {})
    return dramatiq.Message(
        queue_name=message.queue_name,
        actor_name=message.actor_name,
        args=tuple(args) if args is not None else tuple(message.args),
        kwargs=dict(message.kwargs),
        options=kept,
        message_id=message.message_id,
        message_timestamp=message.message_timestamp,
    )
