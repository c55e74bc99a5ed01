"""Cancelling a queued or deferred job (``POST /v1/jobs/{job_id}/cancel``) without losing the change it carries.

An accepted change is never lost, so a cancel does not drop the job: it dead-letters the job's target, with a DLQ
record of cause ``cancelled`` ("cancelled by operator") holding the job's payload, replayable like any dead letter
(``calsync dlq replay``, ``POST /v1/dead-letters/replay``). The job's message stays on the queue; when a worker gets
it, the target is failed, so the job is acked as stale before the lock and calls no provider
(core/worker/job.py ``_superseded``).

The cancel takes the target's lock first, so it never races a delivery of the job that is running: a job holding the
lock is refused (409: it is running; cancel again once it waits). Under the lock the target is failed only while it
is still pending with this job id, in one transaction with the record. The lock's handover is left ``unknown``, so a
delivery that read the target before the cancel reads it again under the lock and finds it failed.

The record's payload is the job the reconciler would enqueue for the target (the job's own payload is on the queue,
not in the database): the same target and version, the create's key unless a sync spent it, under the cancelled
job's id; a replay runs it under a new one.
"""

from __future__ import annotations

import contextlib
import datetime as dt

from calsync.core.clients import Clients
from calsync.core.model.errors import JobCancelled, JobNotCancellable
from calsync.core.model.ids import new_trace_id
from calsync.core.model.payload import SYNC_JOB
from calsync.core.model.vocabulary import DeadLetterCause
from calsync.core.producer.reconcile import lost_job
from calsync.core.redis.locks import LockManager
from calsync.core.store import dead_letters, events, job_lookup, targets
from calsync.core.store.dead_letters import DeadLetter, DeadLetterRecord
from calsync.core.store.targets import TargetRow


def cancel_job(clients: Clients, tenant_id: str, job_id: str, *, note: str | None = None) -> DeadLetter | None:
    """Dead-letter the target of the tenant's queued or deferred job ``job_id``; its record, or None when the tenant
    has no such job. Raises :class:`JobNotCancellable` for a job that is running, finished or dead-lettered."""
    with clients.db.read() as conn:
        found = job_lookup.find_job(conn, tenant_id, job_id)
    if found is None:
        return None
    row = found.target
    if row is None or row.status != "pending":
        raise JobNotCancellable(f"job {job_id} is {found.state}: only a queued or deferred job can be cancelled")
    with contextlib.closing(LockManager(clients.redis, ttl_seconds=clients.settings.lock_ttl)) as locks:
        held = locks.acquire(clients.keys.lock(*row.key), handover=clients.keys.handover(*row.key))
        if held is None:
            raise JobNotCancellable(f"job {job_id} is running: cancel it again once it waits")
        try:
            return _dead_letter(clients, row, job_id, note)
        finally:
            locks.release(held)  # says nothing: the next holder reads the target again


def _dead_letter(clients: Clients, row: TargetRow, job_id: str, note: str | None) -> DeadLetter:
    message = str(JobCancelled(f"job {job_id} cancelled by an operator" + (f": {note}" if note else "")))
    with clients.db.write() as conn:
        event = events.get_event(conn, row.tenant_id, row.event_id)
        if event is None or not targets.cancel(conn, row.key, job_id=job_id, message=message):
            raise JobNotCancellable(f"job {job_id} is no longer queued: its target moved on meanwhile")
        payload = lost_job(row, event, new_trace_id()).model_copy(update={"job_id": job_id})
        now = dt.datetime.now(dt.UTC)
        record = DeadLetterRecord(
            job_id=job_id, job_type=SYNC_JOB, message_id=None, queue=None, tenant_id=row.tenant_id,
            entity_id=row.event_id, account_id=row.account_id, idempotency_key=payload.idempotency_key,
            trace_id=payload.trace_id, payload=payload.to_message_arg(), attempts=0,
            reason=DeadLetterCause.CANCELLED.reason(None), error_class=JobCancelled.__name__, last_error=message,
            error_history=[], first_failed_at=now, failed_at=now,
        )  # fmt: skip
        dead_letters.insert(clients.db, conn, record)
        stored = job_lookup.find_job(conn, row.tenant_id, job_id)
    assert stored is not None and stored.dead_letter is not None
    return stored.dead_letter
