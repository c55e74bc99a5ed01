"""The webhook outbox: record a notification in the transaction of what it reports, dispatch it after the commit.

A sync result, a dead letter or an account needing re-authorization adds one ``webhook_notifications``
row in the same transaction, but only when the tenant has an enabled endpoint for that event type: the
directory of subscriptions is cached per process (``Settings.webhook_directory_ttl``, 5 s), so a tenant
without webhooks costs the sync path nothing but a dictionary lookup. After the commit its id is enqueued in a
``dispatch_webhook`` message shared with the other ids of the last few milliseconds; if that fails, the row
waits for the reconciler (intent first).

One outbox per worker process, built by its composition root and given to the sync job and the DLQ
recorder, which share its directory and its flusher.

Webhook work is sent again from here too: a dead letter replayed (``calsync dlq replay``), what the broker
lost (the reconciler).

**Replay.** The same notification, so the same ``webhook-id``. A record of kind ``webhook`` names its
(notification, endpoint): the delivery row is made pending again with a fresh schedule, in the
transaction that closes the record, then its message is enqueued (a lost enqueue leaves the row due, for
the reconciler). An endpoint that is disabled or gone is refused: enable it first. A webhook actor that
crashed (a record of kind ``job``) is enqueued again as it was.

**Reconcile.** A notification is committed with what it reports and its dispatch is enqueued after the
commit; a delivery row holds its next due time before its message is enqueued. So a notification still
undispatched, or a pending delivery overdue, by ``RECONCILE_AFTER`` has no live message: enqueue it again.
Duplicates cost at most a second request with the same ``webhook-id`` (receivers deduplicate on it).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

import dramatiq
from sqlalchemy import Connection

from calsync.core.messaging.messages import (
    DELIVER_WEBHOOK_JOB,
    DISPATCH_WEBHOOK_JOB,
    webhook_delivery_message,
    webhook_dispatch_message,
)
from calsync.core.model.calendar import EventState
from calsync.core.model.dlq_reports import ReplayedOut
from calsync.core.model.ids import new_id
from calsync.core.model.payload import JobPayload, Operation
from calsync.core.model.vocabulary import WebhookEventType
from calsync.core.store import dead_letters, targets
from calsync.core.store.database import Database
from calsync.core.store.dead_letters import DeadLetter, DeadLetterRecord
from calsync.core.webhooks import store
from calsync.core.webhooks.model import notification

log = logging.getLogger(__name__)

LINGER = 0.05  # seconds a notification id waits for others to share its dispatch message
BATCH = 500  # ids per dispatch message
WEBHOOK_JOBS = (DISPATCH_WEBHOOK_JOB, DELIVER_WEBHOOK_JOB)


class Outbox:
    """Decides which notifications a job records, records them, and enqueues their dispatch after the commit."""

    def __init__(self, db: Database, queue: str, *, ttl: float) -> None:
        self.db = db
        self.queue = queue
        self.ttl = ttl
        self._directory: dict[str, frozenset[str]] = {}
        self._loaded = float("-inf")
        self._lock = threading.Lock()  # one directory refresh at a time
        self._sending = threading.Lock()
        self._pending: list[str] = []
        self._broker: dramatiq.Broker | None = None

    def wants(self, tenant_id: str, event_type: WebhookEventType) -> bool:
        """Whether an enabled endpoint of the tenant wants this event type (cached for ``ttl`` seconds)."""
        if time.monotonic() - self._loaded >= self.ttl:
            with self._lock:
                if time.monotonic() - self._loaded >= self.ttl:
                    self._refresh()
        return event_type in self._directory.get(tenant_id, ())

    def _refresh(self) -> None:
        try:
            with self.db.read() as conn:
                self._directory = store.subscriptions(conn)
        except Exception:
            log.warning("could not read the webhook subscriptions; using the last ones", exc_info=True)
        self._loaded = time.monotonic()

    def on_synced(
        self, conn: Connection, payload: JobPayload, event: EventState, effect: Operation, external_id: str | None
    ) -> list[str]:
        """``sync.succeeded`` (and ``event.cancelled`` once every target is deleted), in the result's transaction."""
        recorded = []
        tenant, entity, version = payload.tenant_id, payload.entity_id, event.version
        common = {"tenant_id": tenant, "entity_id": entity, "version": version, "trace_id": payload.trace_id}
        if self.wants(tenant, "sync.succeeded"):
            status = "deleted" if effect == "delete" else "synced"
            data = {**common, "account_id": payload.account_id, "external_id": external_id, "status": status}
            key = (tenant, entity, payload.account_id, version)
            recorded.append(_record(conn, "sync.succeeded", data | {"job_id": payload.job_id}, key))
        if (
            effect == "delete"
            and event.status == "cancelled"
            and self.wants(tenant, "event.cancelled")
            and targets.all_deleted(conn, tenant, entity)
        ):
            data = {**common, "status": "cancelled"}
            recorded.append(_record(conn, "event.cancelled", data, (tenant, entity, version)))
        return recorded

    def on_dead_lettered(
        self, conn: Connection, record: DeadLetterRecord, payload: JobPayload, *, needs_reauth: bool
    ) -> list[str]:
        """``sync.dead_lettered`` (and ``account.needs_reauth``), inside the DLQ record's transaction."""
        recorded = []
        tenant, job_id = payload.tenant_id, payload.job_id
        common = payload.model_dump(include={"tenant_id", "account_id", "job_id", "trace_id"})
        common |= {"reason": record.reason, "error_class": record.error_class}
        if self.wants(tenant, "sync.dead_lettered"):
            data = {**common, "entity_id": payload.entity_id, "version": payload.target_version, "status": "failed"}
            recorded.append(_record(conn, "sync.dead_lettered", data, (job_id,)))
        if needs_reauth and self.wants(tenant, "account.needs_reauth"):
            data = {**common, "status": "needs_reauth"}
            key = (payload.account_id, job_id)
            recorded.append(_record(conn, "account.needs_reauth", data, key))
        return recorded

    def on_drifted(
        self,
        conn: Connection,
        *,
        finding_id: int,
        tenant_id: str,
        account_id: str,
        event_id: str | None,
        external_id: str,
        kind: str,
        version: int | None,
    ) -> list[str]:
        """``event.drifted``: a sweep found a drift and the tenant's policy is to report it, in the finding's
        transaction (one notification per finding: its id is the key)."""
        if not self.wants(tenant_id, "event.drifted"):
            return []
        data = {"tenant_id": tenant_id, "entity_id": event_id, "account_id": account_id, "version": version,
                "external_id": external_id, "status": "drifted", "drift_kind": kind}  # fmt: skip
        return [_record(conn, "event.drifted", data, (tenant_id, finding_id))]

    def send(self, broker: dramatiq.Broker, notification_ids: Iterable[str]) -> None:
        """After the commit: the ids wait ``LINGER`` seconds for others, then go in batches (one message per batch).

        An enqueue per sync would cost the calendar queue more than the outbox row (docs/notes/webhooks.md);
        batched, it is shared by every job of the last ``LINGER`` seconds. Ids a dying process had not flushed
        yet wait for the reconciler.
        """
        with self._sending:
            self._broker = broker
            first = not self._pending
            self._pending.extend(notification_ids)
        if first:  # the first id of a batch schedules its flush
            timer = threading.Timer(LINGER, self.flush)
            timer.daemon = True
            timer.start()

    def flush(self) -> None:
        """Enqueue every pending id now (tests, shutdown)."""
        with self._sending:
            batch, self._pending = self._pending, []
            broker = self._broker
        for start in range(0, len(batch), BATCH):
            ids = batch[start : start + BATCH]
            try:
                assert broker is not None
                broker.enqueue(webhook_dispatch_message(self.queue, *ids))
            except Exception:
                log.warning(
                    "could not enqueue a webhook dispatch; the reconciler will",
                    exc_info=True,
                    extra={"fields": {"notification_ids": ids}},
                )


def _record(conn: Connection, event_type: WebhookEventType, data: dict[str, Any], key: Iterable[object]) -> str:
    notification_id, doc = notification(event_type, data, key=key)
    store.record_notification(conn, notification_id, data["tenant_id"], event_type, doc)
    return notification_id


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


def replay_webhook(db: Database, broker: dramatiq.Broker, queue: str, record: DeadLetter) -> ReplayedOut | str:
    """Replay one webhook record: the replayed entry, or why it was skipped."""
    target = _target(record)
    if target is None:
        return "its payload names no webhook delivery; discard it"
    notification_id, endpoint_id = target
    replay_id = new_id("whd")
    with db.write() as conn:
        if endpoint_id is not None:
            endpoint = store.get_endpoint(conn, endpoint_id)
            if endpoint is None:
                return f"webhook endpoint {endpoint_id} was removed; discard it"
            if endpoint.status != "enabled":
                return f"webhook endpoint {endpoint_id} is disabled; enable it first"
        if not dead_letters.mark_replayed(conn, record.id, replay_job_id=replay_id):
            return "record is no longer open"
        if endpoint_id is not None:
            store.reopen_delivery(conn, notification_id, endpoint_id)
    message = (
        webhook_dispatch_message(queue, notification_id)
        if endpoint_id is None
        else webhook_delivery_message(queue, notification_id, endpoint_id)
    )
    try:
        broker.enqueue(message)
    except Exception:
        return ReplayedOut(id=record.id, job_id=replay_id, deferred=True)  # the row is due: the reconciler
    return ReplayedOut(id=record.id, job_id=replay_id)


def reconcile_webhooks(db: Database, broker: dramatiq.Broker, queue: str, *, before: dt.datetime, limit: int) -> int:
    """Re-enqueue lost dispatches and deliveries older than ``before``; how many were enqueued."""
    with db.read() as conn:
        lost = [webhook_dispatch_message(queue, n) for n in store.undispatched(conn, before=before, limit=limit)]
        overdue = store.overdue_deliveries(conn, before=before, limit=limit)
    lost += [webhook_delivery_message(queue, d.notification_id, d.endpoint_id) for d in overdue]
    enqueued = 0
    for message in lost:
        try:
            broker.enqueue(message)
        except Exception:
            log.exception("reconciler could not enqueue %s", message.actor_name)
            continue
        if message.actor_name == DELIVER_WEBHOOK_JOB:  # not overdue again before its next attempt could be
            notification_id, endpoint_id = message.args
            with db.write() as conn:
                store.postpone_delivery(conn, notification_id, endpoint_id, due_at=dt.datetime.now(dt.UTC))
        enqueued += 1
    return enqueued
