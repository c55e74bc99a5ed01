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
# A drift sweep of one account (queue <QUEUE>-drift, core/drift/sweep.py).
SWEEP_JOB = "sweep_account"
# Every actor a worker runs: the job types metrics and the exporter export a series for from the start.
JOB_TYPES = (SYNC_JOB, INTAKE_JOB, RECONCILE_JOB, DISPATCH_WEBHOOK_JOB, DELIVER_WEBHOOK_JOB, SWEEP_JOB)

#: Message option of a re-run of one target (a repair, a delete's verification): it runs even when its version
#: is synced already (core/worker/job.py).
REPAIR_OPTION = "repair"
# Options that describe one delivery and must not leak into the next one.
_DELIVERY_OPTIONS = ("eta", "redis_message_id", "traceback", "requeue_timestamp")


def _message(queue: str, actor: str, *args: Any, options: Mapping[str, Any] | None = None) -> dramatiq.Message[Any]:
    # Every message we send: positional arguments only (what producers in other languages build too).
    return dramatiq.Message(queue_name=queue, actor_name=actor, args=args, kwargs={}, options=dict(options or {}))


def sync_message(queue: str, payload: JobPayload, *, options: Mapping[str, Any] | None = None) -> dramatiq.Message[Any]:
    """A fresh message for a sync job."""
    return _message(queue, SYNC_JOB, payload.to_message_arg(), options=options)


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
    message = _message(queue, INTAKE_JOB, intake.to_message_arg())
    return message if message_id is None else message.copy(message_id=message_id)


def reconcile_message(queue: str) -> dramatiq.Message[Any]:
    """A message asking a worker to run the reconciler (what the Kubernetes CronJob sends)."""
    return _message(queue, RECONCILE_JOB)


def webhook_dispatch_message(queue: str, *notification_ids: str) -> dramatiq.Message[Any]:
    """Ask a worker to create notifications' deliveries (one per subscribed endpoint) and enqueue them."""
    return _message(queue, DISPATCH_WEBHOOK_JOB, *notification_ids)


def webhook_delivery_message(queue: str, notification_id: str, endpoint_id: str) -> dramatiq.Message[Any]:
    """One (notification, endpoint) delivery; its attempts are counted in its database row, not here."""
    return _message(queue, DELIVER_WEBHOOK_JOB, notification_id, endpoint_id)


def redelivery(
    message: Any, *, args: Iterable[Any] | None = None, options: Mapping[str, Any] | None = None
) -> dramatiq.Message[Any]:
    """A copy of a message for a later delivery: same id, updated args/options, per-delivery options dropped."""
    kept = {k: v for k, v in message.options.items() if k not in _DELIVERY_OPTIONS}
    fields = message.asdict() | {"options": kept | dict(options or {})}
    if args is not None:
        fields["args"] = tuple(args)
    return dramatiq.Message(**fields)
