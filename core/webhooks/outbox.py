"""The webhook outbox: record a notification in the transaction of what it reports, dispatch it after the commit.

A sync result, a dead letter or an account needing re-authorization adds one ``webhook_notifications``
row in the same transaction, but only when the tenant has an enabled endpoint for that event type: the
directory of subscriptions is cached per process (``Settings.webhook_directory_ttl``, 5 s), so a tenant
without webhooks costs the sync path nothing but a dictionary lookup. After the commit its id is enqueued in a
``dispatch_webhook`` message shared with the other ids of the last few milliseconds; if that fails, the row
waits for the reconciler (intent first).

One outbox per worker process, built by its composition root and given to the sync job and the DLQ
recorder, which share its directory and its flusher.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

import dramatiq
from sqlalchemy import Connection

from calsync.core.messaging.messages import webhook_dispatch_message
from calsync.core.model.calendar import EventState
from calsync.core.model.payload import JobPayload, Operation
from calsync.core.model.vocabulary import WebhookEventType
from calsync.core.store import targets
from calsync.core.store.database import Database
from calsync.core.store.dead_letters import DeadLetterRecord
from calsync.core.webhooks import store
from calsync.core.webhooks.model import notification

log = logging.getLogger(__name__)

LINGER = 0.05  # seconds a notification id waits for others to share its dispatch message
BATCH = 500  # ids per dispatch message


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
        common = {
            "tenant_id": tenant,
            "account_id": payload.account_id,
            "reason": record.reason,
            "error_class": record.error_class,
            "job_id": job_id,
            "trace_id": payload.trace_id,
        }
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
