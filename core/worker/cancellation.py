"""After a delete reached the provider: a delayed re-run when it knew no provider id, and the moment a cancellation
is complete (the last target of a cancelled event deleted).

A delete that knew no provider id looked the event up (Google: its deterministic ids; EWS and Graph: the sync
key) and may have found nothing because the create it raced is still in flight: that create's job holds no
lock any more (its client gave up at ``PROVIDER_TIMEOUT``; its retry is dropped as stale), yet the provider
may still apply it. So the delete runs once more ``DELETE_VERIFY_DELAY`` seconds later (a repair-style
message whose key ends in ``:verify``; it never schedules another).

Whether every target of a cancelled event is now gone (``targets.all_deleted``, unlocked) is asked for the log
line that says so, after the commit: when the last two deletes commit at the same time both may log it. The
``event.cancelled`` webhook is not emitted here: core/webhooks/outbox.py records it inside the last delete's
result transaction, with the event row locked, so concurrent last deletes serialise and exactly one records it
(its id is keyed by tenant, event and cancelled version besides). Verification re-runs do not ask: the first
delete already did.
"""

from __future__ import annotations

import logging

import dramatiq

from calsync.core.messaging.messages import rerun_message
from calsync.core.model.calendar import EventState
from calsync.core.model.payload import VERIFY_SUFFIX, JobPayload, verification_key
from calsync.core.store import targets
from calsync.core.store.database import Database
from calsync.core.store.targets import TargetRow

log = logging.getLogger(__name__)


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
    """A target's delete is committed: re-run it later if it knew no provider id; say when the event is gone."""
    if payload.idempotency_key.endswith(VERIFY_SUFFIX):  # the delayed re-run: its first delete did both
        return
    if target.external_id is None and verify_delay > 0:
        check = rerun_message(queue, payload, "delete", event.version, verification_key(payload.idempotency_key))
        broker.enqueue(check, delay=int(verify_delay * 1000))
        fields = {"verify_job_id": check.args[0]["job_id"], "delay_seconds": verify_delay}
        log.info("delete knew no provider id; it runs again later", extra={"fields": fields})
    if event.status == "cancelled":
        with db.read() as conn:
            gone = targets.all_deleted(conn, event.tenant_id, event.id, lock=False)
        if gone:
            log.info("cancelled event removed from every account", extra={"fields": {"version": event.version}})
