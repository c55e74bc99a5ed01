"""Deliveries: a notification's fan-out to its endpoints, then each (notification, endpoint) delivery: sign,
post, then done, retry later, or dead-letter; and the endpoint's breaker.

The fan-out (``dispatch_webhook``) creates one delivery row per endpoint enabled and subscribed at that
moment, in the transaction that claims the dispatch, so a duplicate dispatch message creates and enqueues
nothing: each (notification, endpoint) gets one delivery. A lost delivery message leaves its row pending
and due, for the reconciler.

2xx is done. 5xx, 408, 429, timeouts and connection errors are retried on ``WEBHOOK_RETRY_SCHEDULE``
± ``RETRY_JITTER``, a ``Retry-After`` (429, 503) as a floor (capped at an hour); any
other answer is permanent. A permanent answer, exhausted retries, a URL that now resolves to a refused
address or a disabled endpoint end in the DLQ (kind ``webhook``: status, a truncated body); ``calsync dlq
replay`` sends it again under the same ``webhook-id``. The row counts attempts and holds the next due time
before the retry is enqueued, so a lost message is found by the reconciler, never restarted.

Each run answers how it ended (:class:`Attempted`): the ``deliver_webhook`` actor makes that its job's outcome and
log line (a dead-lettered delivery is a dead-lettered job, never a success).

Every failed attempt extends the endpoint's failure streak; an endpoint failing for
``WEBHOOK_DISABLE_AFTER`` seconds and at least ``WEBHOOK_DISABLE_MIN_FAILURES`` attempts in a row is
disabled (``disabled_by = auto``) until an operator enables it again.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass, field

import dramatiq
import httpx
from prometheus_client import Counter, Histogram
from sqlalchemy import Connection

from calsync.core.messaging.messages import DELIVER_WEBHOOK_JOB, webhook_delivery_message
from calsync.core.model.backoff import retry_delay
from calsync.core.model.errors import InvalidWebhookUrl, SecretKeyMismatch
from calsync.core.model.ids import new_id
from calsync.core.model.redaction import redact
from calsync.core.model.vocabulary import Outcome, WebhookOutcome
from calsync.core.model.webhooks import WebhookNotification
from calsync.core.store import dead_letters
from calsync.core.store.crypto import CredentialCipher
from calsync.core.store.database import Database
from calsync.core.store.dead_letters import DeadLetterRecord
from calsync.core.store.unreadable_secrets import UnreadableSecrets
from calsync.core.webhooks import store
from calsync.core.webhooks.model import request_headers
from calsync.core.webhooks.store import Endpoint, Notification
from calsync.core.webhooks.transport import Answer, Transport

log = logging.getLogger(__name__)

# Metrics (docs/METRICS.md): labels are low-cardinality, the outcome vocabulary and the status class (``2xx``..``5xx``,
# ``timeout``, ``connection``, ``none``), never a tenant, endpoint or URL.
DELIVERIES = Counter(
    "calsync_webhook_deliveries_total",
    "Webhook delivery attempts by outcome (delivered, retry_scheduled, permanent, exhausted, refused, skipped) "
    "and the answer's status class.",
    ["outcome", "status_class"],
)
DELIVERY_SECONDS = Histogram(
    "calsync_webhook_delivery_seconds",
    "Time of one webhook request, from the connection to the answer (or the timeout).",
    ["status_class"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
ENDPOINTS_DISABLED = Counter(
    "calsync_webhook_endpoints_auto_disabled_total",
    "Webhook endpoints the breaker disabled after failing for WEBHOOK_DISABLE_AFTER seconds.",
)


def _status_class(status: int | None, error: BaseException | None = None) -> str:
    """``2xx``..``5xx`` for an answer, ``timeout`` or ``connection`` for none, ``none`` when not attempted."""
    if status is not None:
        return f"{status // 100}xx"
    if error is None:
        return "none"
    return "timeout" if isinstance(error, httpx.TimeoutException) else "connection"


def export_delivery_zeros() -> None:
    """Every (outcome, status class) series of calsync_webhook_deliveries_total at 0, when a worker process boots: a
    series that first appears with its first attempt hides that attempt from ``increase()``."""
    for outcome in WebhookOutcome:
        for status_class in (*(f"{n}xx" for n in range(1, 6)), "timeout", "connection", "none"):
            DELIVERIES.labels(outcome.value, status_class)


def _count(outcome: WebhookOutcome, status: int | None = None, error: BaseException | None = None) -> None:
    """One attempt (or skip) counted."""
    DELIVERIES.labels(outcome.value, _status_class(status, error)).inc()


@dataclass(frozen=True)
class DeliveryPolicy:
    """When attempts repeat and when an endpoint's breaker opens."""

    schedule: tuple[float, ...]
    jitter: float
    disable_after: float
    disable_min_failures: int
    max_retry_after: float = 3600  # a longer Retry-After is cut to this


@dataclass(frozen=True)
class _Failure:
    outcome: WebhookOutcome
    reason: str  # the DLQ reason (low-cardinality)
    status: int | None
    detail: str
    error_class: str
    error: Exception | None = None  # what the transport raised, for the status class of the metric


@dataclass(frozen=True)
class Attempted:
    """How one run of a delivery ended: the attempt's outcome, and what the job's one log line says of it."""

    outcome: WebhookOutcome
    fields: dict[str, object]  # notification_id, endpoint_id, attempt, status, retry_in_seconds
    dead_letter_reason: str | None = None  # the DLQ record's reason, when this run dead-lettered the delivery

    @property
    def job_outcome(self) -> Outcome:
        """The run's outcome as a job (the log line, ``calsync_jobs_total``): a dead letter is never a success."""
        if self.dead_letter_reason is not None:
            return Outcome.DEAD_LETTERED
        if self.outcome is WebhookOutcome.RETRY_SCHEDULED:
            return Outcome.RETRY_SCHEDULED
        return Outcome.ALREADY_DONE if self.outcome is WebhookOutcome.SKIPPED else Outcome.SUCCESS


@dataclass
class Deliverer:
    """Runs the ``dispatch_webhook`` and ``deliver_webhook`` actors' work."""

    db: Database
    cipher: CredentialCipher
    transport: Transport
    broker: dramatiq.Broker
    queue: str
    policy: DeliveryPolicy
    # Signing secrets this worker's keys cannot open: held, and said.
    unreadable: UnreadableSecrets = field(default_factory=UnreadableSecrets)

    def dispatch(self, notification_id: str) -> list[str]:
        """Create the deliveries of a recorded notification and enqueue them; the endpoint ids enqueued."""
        with self.db.write() as conn:
            found = store.get_notification(conn, notification_id)
            if found is None or not store.claim_dispatch(conn, notification_id):
                return []
            endpoints = [e.id for e in store.subscribed(conn, found.tenant_id, found.event_type)]
            store.create_deliveries(conn, notification_id, endpoints)
        for endpoint_id in endpoints:
            self._enqueue(notification_id, endpoint_id)
        return endpoints

    def deliver(self, notification_id: str, endpoint_id: str) -> Attempted:
        """One attempt of a pending delivery (anything else, a removed endpoint's too, is skipped)."""
        with self.db.read() as conn:
            delivery = store.get_delivery(conn, notification_id, endpoint_id)
            endpoint = store.get_endpoint(conn, endpoint_id)
            found = store.get_notification(conn, notification_id)
            try:
                keys = store.signing_secrets(conn, self.cipher, endpoint_id, dt.datetime.now(dt.UTC))
            except SecretKeyMismatch:
                raise self.unreadable.held(endpoint_id, "webhook endpoint") from None
        if delivery is None or delivery.status != "pending" or found is None or endpoint is None:
            _count(WebhookOutcome.SKIPPED)
            return Attempted(WebhookOutcome.SKIPPED, {"notification_id": notification_id, "endpoint_id": endpoint_id})
        if endpoint.status != "enabled":
            why = f"endpoint {endpoint.id} is disabled ({endpoint.disabled_by})"
            failure = _Failure(WebhookOutcome.SKIPPED, "webhook endpoint disabled", None, why, "EndpointDisabled")
            return self._dead_letter(found, endpoint, delivery.attempts, failure)
        return self._attempt(found, endpoint, delivery.attempts + 1, keys)

    def _attempt(self, notification: Notification, endpoint: Endpoint, attempt: int, keys: list[str]) -> Attempted:
        body = WebhookNotification.model_validate(notification.payload).body()
        started = time.monotonic()
        answer: Answer | None = None
        error: Exception | None = None
        try:
            address = self.transport.check(endpoint.url)
            headers = request_headers(keys, notification.id, int(time.time()), body)
            answer = self.transport.post(endpoint.url, address, headers, body)
        except InvalidWebhookUrl as exc:
            failure = _Failure(WebhookOutcome.REFUSED, "webhook address refused", None, str(exc), "InvalidWebhookUrl")
            return self._dead_letter(notification, endpoint, attempt, failure)
        except httpx.HTTPError as exc:  # timeouts, connection errors, protocol errors
            error = exc
        status = answer.status if answer is not None else None
        DELIVERY_SECONDS.labels(_status_class(status, error)).observe(time.monotonic() - started)
        if answer is not None and 200 <= answer.status < 300:
            with self.db.write() as conn:
                store.record_attempt(conn, notification.id, endpoint.id, "delivered", status, None)
                store.record_success(conn, endpoint.id)
            _count(WebhookOutcome.DELIVERED, status)
            return Attempted(WebhookOutcome.DELIVERED, _fields(notification, endpoint, attempt, status))
        if answer is None:
            detail, error_class = f"{type(error).__name__}: {error}", type(error).__name__
        else:
            text = answer.body.decode("utf-8", errors="replace")
            detail, error_class = f"HTTP {answer.status}" + (f": {redact(text)}" if text else ""), "WebhookUnavailable"
        if answer is not None and answer.status < 500 and answer.status not in (408, 429):  # else worth a retry
            failure = _Failure(WebhookOutcome.PERMANENT, "webhook answer refused", status, detail, "WebhookRejected")
            return self._dead_letter(notification, endpoint, attempt, failure)
        if attempt > len(self.policy.schedule):
            detail += f" (retries exhausted after {attempt} attempts)"
            failure = _Failure(
                WebhookOutcome.EXHAUSTED, "webhook retries exhausted", status, detail, error_class, error
            )
            return self._dead_letter(notification, endpoint, attempt, failure)
        hint = answer.retry_after if answer is not None and answer.status in (429, 503) else None
        hint = min(hint, self.policy.max_retry_after) if hint is not None else None
        delay = retry_delay(self.policy.schedule, attempt - 1, jitter=self.policy.jitter, retry_after=hint)
        due = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=delay)
        with self.db.write() as conn:  # the due time first: a lost enqueue is found by the reconciler
            store.record_attempt(conn, notification.id, endpoint.id, "pending", status, detail, due)
            self._failed_attempt(conn, endpoint)
        _count(WebhookOutcome.RETRY_SCHEDULED, status, error)
        self._enqueue(notification.id, endpoint.id, delay=int(delay * 1000))
        fields = _fields(notification, endpoint, attempt, status)
        return Attempted(WebhookOutcome.RETRY_SCHEDULED, {**fields, "retry_in_seconds": round(delay, 3)})

    def _enqueue(self, notification_id: str, endpoint_id: str, *, delay: int | None = None) -> None:
        # A failed enqueue leaves the row pending and due: the reconciler sends it.
        try:
            self.broker.enqueue(webhook_delivery_message(self.queue, notification_id, endpoint_id), delay=delay)
        except Exception:
            ids = {"notification_id": notification_id, "endpoint_id": endpoint_id}
            log.warning(
                "could not enqueue a webhook delivery; the reconciler will", exc_info=True, extra={"fields": ids}
            )

    def _dead_letter(
        self, notification: Notification, endpoint: Endpoint, attempts: int, failure: _Failure
    ) -> Attempted:
        # A run that found the endpoint disabled counts as an attempt too, as the DLQ record does (at least one),
        # but not toward the breaker: it sent nothing.
        record = _record(notification, endpoint, attempts, failure, self.queue)
        with self.db.write() as conn:
            store.record_attempt(conn, notification.id, endpoint.id, "failed", failure.status, failure.detail)
            dead_letters.insert(self.db, conn, record)
            if failure.outcome is not WebhookOutcome.SKIPPED:
                self._failed_attempt(conn, endpoint)
        _count(failure.outcome, failure.status, failure.error)
        return Attempted(failure.outcome, _fields(notification, endpoint, attempts, failure.status), failure.reason)

    def _failed_attempt(self, conn: Connection, endpoint: Endpoint) -> None:
        # The breaker: a long enough failure streak disables the endpoint (in the attempt's transaction).
        now = dt.datetime.now(dt.UTC)
        updated = store.record_failure(conn, endpoint.id, now)
        if updated is None or updated.status != "enabled" or updated.failing_since is None:
            return
        failing = (now - updated.failing_since).total_seconds()
        if updated.consecutive_failures < self.policy.disable_min_failures or failing < self.policy.disable_after:
            return
        reason = f"failing since {updated.failing_since.isoformat()} ({updated.consecutive_failures} attempts in a row)"
        store.set_status(conn, endpoint.id, "disabled", by="auto", reason=reason)
        ENDPOINTS_DISABLED.inc()
        fields = {"endpoint_id": endpoint.id, "tenant_id": endpoint.tenant_id, "why": reason}
        log.warning("webhook endpoint disabled by its breaker", extra={"fields": fields})


def _fields(notification: Notification, endpoint: Endpoint, attempt: int, status: int | None) -> dict[str, object]:
    return {"notification_id": notification.id, "endpoint_id": endpoint.id, "attempt": attempt, "status": status}


def _record(
    notification: Notification, endpoint: Endpoint, attempts: int, failure: _Failure, queue: str
) -> DeadLetterRecord:
    """The DLQ record of a failed delivery: enough to replay it under the same webhook-id."""
    data = notification.payload.get("data", {})
    now = dt.datetime.now(dt.UTC)
    entry = {"attempt": attempts, "at": now.isoformat(), "error_class": failure.error_class, "message": failure.detail}
    return DeadLetterRecord(
        job_id=new_id("whd"), job_type=DELIVER_WEBHOOK_JOB, message_id=None, queue=queue,
        tenant_id=notification.tenant_id, entity_id=data.get("entity_id"), account_id=data.get("account_id"),
        idempotency_key=None, trace_id=data.get("trace_id"),
        payload={"notification_id": notification.id, "endpoint_id": endpoint.id, "event_type": notification.event_type,
                 "status": failure.status},
        attempts=max(attempts, 1), reason=failure.reason, error_class=failure.error_class, last_error=failure.detail,
        error_history=[entry], first_failed_at=now, failed_at=now, kind="webhook",
    )  # fmt: skip
