"""After a delete reached the provider: a delayed re-run when it knew no provider id, and the moment a cancellation
is complete (the last target of a cancelled event deleted).

A delete that knew no provider id looked the event up (Google: its deterministic ids; EWS and Graph: the sync
key) and may have found nothing because the create it raced is still in flight: that create's job holds no
lock any more (its client gave up at ``PROVIDER_TIMEOUT``; its retry is dropped as stale), yet the provider
may still apply it. So the delete runs once more ``DELETE_VERIFY_DELAY`` seconds later (a repair-style
message whose key ends in ``:verify``; it never schedules another).

:func:`target_deleted` tells whether every target of a cancelled event is now gone
(core/store/cancelled_events.py), for the log line that says so. It is asked after the commit, so when the
last two deletes commit at the same time both may log it. The ``event.cancelled`` webhook is not emitted
here: core/webhooks/outbox.py records it inside the last delete's result transaction, with the event row
locked, so concurrent last deletes serialise and exactly one records it (its id is keyed by tenant, event
and cancelled version besides). Verification re-runs do not ask: the first delete already did.
"""

from __future__ import annotations

import logging

import dramatiq

from calsync.core.messaging.messages import sync_message
from calsync.core.model.calendar import EventState
from calsync.core.model.payload import VERIFY_SUFFIX, JobPayload, new_payload, verification_key
from calsync.core.store import cancelled_events
from calsync.core.store.database import Database
from calsync.core.store.targets import TargetRow
from calsync.core.worker.context import REPAIR_OPTION

log = logging.getLogger(__name__)


def is_verification(payload: JobPayload) -> bool:
    """Whether this delete is the delayed re-run of an earlier one."""
    return payload.idempotency_key.endswith(VERIFY_SUFFIX)


def after_delete(
    db: Database,
    broker: dramatiq.Broker,
    queue: str,
    payload: JobPayload,
    event: EventState,
    target: TargetRow,
    *,
    verify_delay: float,
) -> None:
    """A target's delete is committed: re-run it later if it knew no provider id; see if the event is gone."""
    if is_verification(payload):
        return
    if target.external_id is None and verify_delay > 0:
        verify_later(broker, queue, payload, event.version, verify_delay)
    if event.status == "cancelled":
        target_deleted(db, event)


def verify_later(broker: dramatiq.Broker, queue: str, payload: JobPayload, version: int, delay: float) -> None:
    """Enqueue the delete's one re-run, due after ``delay`` seconds."""
    check = new_payload(
        tenant_id=payload.tenant_id,
        entity_id=payload.entity_id,
        account_id=payload.account_id,
        operation="delete",
        version=version,
        trace_id=payload.trace_id,
        key=verification_key(payload.idempotency_key),
    )
    broker.enqueue(sync_message(queue, check, options={REPAIR_OPTION: True}), delay=int(delay * 1000))
    log.info("delete knew no provider id; it runs again later", extra={"fields": {"verify_job_id": check.job_id,
                                                                                 "delay_seconds": delay}})  # fmt: skip


def target_deleted(db: Database, event: EventState) -> bool:
    """After a cancelled event's target was deleted: True when no target of the event is left anywhere."""
    with db.read() as conn:
        gone = cancelled_events.removed_everywhere(conn, event.tenant_id, event.id)
    if gone:
        log.info("cancelled event removed from every account", extra={"fields": {"version": event.version}})
    return gone
