"""Operating the dead-letter queue: inspect, replay after the root cause is fixed, or discard.

A replay enqueues the original payload under a new job id with ``attempt`` reset, keeping its
idempotency key, so an effect that did happen is not repeated and a job made stale by newer changes
is skipped. An intake message (``submit_change``) is sent again as it was, under its original message
id, so it stays idempotent under the same request key. Records of accounts still awaiting
re-authorization are not replayed (they would fail again at once); re-authorize the account first.
A webhook delivery (kind ``webhook``) is delivered again under its ``webhook-id`` (core/webhooks/outbox.py).

A quarantined message (kind ``quarantined``) is replayed only when its stored body is complete and
decodes to the envelope of a job this module knows (a sync job or the reconciler): it is then enqueued
afresh on the configured queue, which repairs what the producer got wrong about the envelope (queue
name, ``redis_message_id``), and its payload is checked like any other. Anything else is refused with
the reason; such records are for reading and discarding (``calsync dlq purge-quarantined``).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import dramatiq

from calsync.core.clients import Clients
from calsync.core.messaging.lanes import lanes_of
from calsync.core.messaging.messages import RECONCILE_JOB, intake_message, reconcile_message, sync_message
from calsync.core.model.dlq_reports import DiscardedEntryOut, DiscardReportOut, ReplayedOut, ReplayReportOut, SkippedOut
from calsync.core.model.errors import InvalidChange, InvalidPayload
from calsync.core.model.ids import new_id
from calsync.core.model.intake import INTAKE_JOB, parse_intake
from calsync.core.model.payload import SYNC_JOB, parse_payload
from calsync.core.producer.fairness import lane_choice
from calsync.core.store import accounts, dead_letters, targets
from calsync.core.store.dead_letters import DeadLetter
from calsync.core.store.targets import TargetKey
from calsync.core.webhooks import WEBHOOK_JOBS, replay_webhook

log = logging.getLogger(__name__)


def replay(
    clients: Clients, records: Iterable[DeadLetter], *, on_progress: Callable[[DeadLetter], None] | None = None
) -> ReplayReportOut:
    """Re-enqueue open records whose cause is fixed; reports what was skipped and why."""
    report = ReplayReportOut(replayed=[], skipped=[])
    for record in records:
        done = _replay_one(clients, record)
        if isinstance(done, str):
            report.skipped.append(SkippedOut(id=record.id, job_id=record.job_id, why=done))
        else:
            report.replayed.append(done)
        if on_progress is not None:
            on_progress(record)
    return report


def _recovered(record: DeadLetter) -> DeadLetter | str:
    # The job inside a quarantined message, as a record the job path below can replay; else why not.
    body = record.raw_body
    if body is None or record.raw_size is None or len(body) < record.raw_size:
        return "its body was truncated when it was quarantined"
    try:
        doc = json.loads(body.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError and JSONDecodeError both are
        return "its body is not UTF-8 JSON"
    if not isinstance(doc, dict) or doc.get("actor_name") not in (SYNC_JOB, RECONCILE_JOB):
        return "its body is not the envelope of a calsync job"
    args, kwargs = doc.get("args"), doc.get("kwargs")
    if not isinstance(args, list) or kwargs not in (None, {}):
        return "its arguments are not a job's"
    if doc["actor_name"] == RECONCILE_JOB:
        return replace(record, job_type=RECONCILE_JOB) if not args else "the reconciler takes no arguments"
    return replace(record, job_type=SYNC_JOB, payload=args[0] if len(args) == 1 else args)


def _replay_one(clients: Clients, record: DeadLetter) -> ReplayedOut | str:
    """The replayed entry, or why the record was skipped."""
    if record.status != "open":
        return f"record is {record.status}"
    if record.kind == "quarantined":
        recovered = _recovered(record)
        if isinstance(recovered, str):
            return f"quarantined message cannot be replayed: {recovered}; discard it"
        record = recovered
    if record.job_type == RECONCILE_JOB:
        return _replay_message(clients, record, reconcile_message(clients.settings.queue))
    if record.job_type == INTAKE_JOB:
        return _replay_intake(clients, record)
    if record.kind == "webhook" or record.job_type in WEBHOOK_JOBS:
        return replay_webhook(clients.db, clients.broker, clients.settings.webhook_queue, record)
    if record.job_type != SYNC_JOB:
        return f"unknown job type {record.job_type!r}: discard it"
    try:
        payload = parse_payload([record.payload])
    except InvalidPayload as exc:
        return f"payload is invalid ({exc}); fix the producer and discard this record"
    now = dt.datetime.now(dt.UTC)
    fresh = payload.model_copy(update={"job_id": new_id("job"), "attempt": 1, "scheduled_at": now})
    with clients.db.write() as conn:
        account = accounts.get_summary(conn, payload.account_id)
        if account is not None and account.status not in ("active", "removing"):  # removing: its deletes replay
            return f"account {account.id} is {account.status}; re-authorize or enable it first"
        if not dead_letters.mark_replayed(conn, record.id, replay_job_id=fresh.job_id):
            return "record is no longer open"
        key = TargetKey(payload.tenant_id, payload.entity_id, payload.account_id)
        targets.reopen(conn, key, due_at=now, job_id=fresh.job_id)
    try:
        # A replay of many dead letters of one tenant takes the bulk lane past the tenant's rate.
        [lane] = lane_choice(clients).lanes(payload.tenant_id, 1)
        clients.broker.enqueue(sync_message(lanes_of(clients.settings).queue(lane), fresh))
    except Exception:
        # The target is pending again, so the reconciler will enqueue it once the broker is back.
        log.exception("replay enqueue failed; the reconciler will retry it", extra={"fields": {"record": record.id}})
        return ReplayedOut(id=record.id, job_id=fresh.job_id, deferred=True)
    return ReplayedOut(id=record.id, job_id=fresh.job_id)


def _replay_intake(clients: Clients, record: DeadLetter) -> ReplayedOut | str:
    try:
        intake = parse_intake([record.payload], {})
    except (InvalidPayload, InvalidChange) as exc:
        return f"message is invalid ({exc}); fix the producer and discard this record"
    message = intake_message(clients.settings.intake_queue, intake, message_id=record.message_id)
    return _replay_message(clients, record, message)


def _replay_message(clients: Clients, record: DeadLetter, message: dramatiq.Message[Any]) -> ReplayedOut | str:
    # Enqueued inside the transaction: if the broker refuses it, the record stays open (no reconciler covers it).
    with clients.db.write() as conn:
        if not dead_letters.mark_replayed(conn, record.id, replay_job_id=message.message_id):
            return "record is no longer open"
        clients.broker.enqueue(message)
    return ReplayedOut(id=record.id, job_id=message.message_id)


def purge_quarantined(clients: Clients, *, reason: str | None = None, note: str | None = None) -> DiscardReportOut:
    """Discard every open quarantined record (of one reason, if given), reporting each."""
    with clients.db.read() as conn:
        found = dead_letters.find(conn, dead_letters.DeadLetterFilter(kind="quarantined", reason=reason, status="open"))
    return discard_records(clients, found, note=note or "purged quarantined messages")


def discard_records(clients: Clients, records: Iterable[DeadLetter], *, note: str | None = None) -> DiscardReportOut:
    """Close the open records without replaying them; reports what was skipped and why."""
    report = DiscardReportOut(discarded=[], skipped=[])
    with clients.db.write() as conn:
        for record in records:
            if record.status != "open":
                report.skipped.append(SkippedOut(id=record.id, job_id=record.job_id, why=f"record is {record.status}"))
            elif dead_letters.mark_discarded(conn, record.id, note=note):
                report.discarded.append(DiscardedEntryOut(id=record.id, job_id=record.job_id))
            else:
                report.skipped.append(SkippedOut(id=record.id, job_id=record.job_id, why="record is no longer open"))
    return report
