"""Building and enqueueing Dramatiq messages: the wire format other services send us.

A job is a Dramatiq message for actor ``sync_calendar_event`` on the configured queue, whose only
positional argument is the :class:`~core.model.payload.JobPayload` as JSON. Producers in other languages
can build the same message (see docs/ARCHITECTURE.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import dramatiq

from calsync.core.model.payload import SYNC_JOB, JobPayload

RECONCILE_JOB = "reconcile"

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


def reconcile_message(queue: str) -> dramatiq.Message[Any]:
    """A message asking a worker to run the reconciler (what the Kubernetes CronJob sends)."""
    return dramatiq.Message(queue_name=queue, actor_name=RECONCILE_JOB, args=(), kwargs={}, options={})


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
