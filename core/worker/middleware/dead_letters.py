"""The durable DLQ: every message Dramatiq rejects is recorded in ``dead_letters`` before the nack.

``before_nack`` is the one place every rejected message passes (permanent errors, exhausted retries,
invalid payloads). In the same transaction the target is marked ``failed`` (unless a newer version
already took over) and, for AuthRevoked, the account is marked ``needs_reauth``. If the database cannot
be reached, the hook raises a broker connection error, which makes Dramatiq retry the whole nack every
few seconds instead of dropping our record. A write that fails for a data reason (a value out of range,
too long, a constraint) would fail the same way forever: the record is then stored degraded (cut to fit
the table, target left alone) instead.

It is also the broker's quarantine (:class:`~core.messaging.quarantine.QuarantineSink`): a delivery the
consumer refused is recorded with kind ``quarantined``: its raw body (size-capped by the door), its full
size, where and how it arrived (``origin``), why it was refused, and whatever ids its payload carried, so
operators can find the producer. A Redis delivery is named by its queued id, so recording a redelivered
one twice is a no-op.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
from typing import Any

import dramatiq
from dramatiq.errors import BrokerConnectionError
from dramatiq.middleware import MiddlewareError

from calsync.core.messaging.envelope import MESSAGE_ID_LIMIT
from calsync.core.messaging.quarantine import Quarantined
from calsync.core.model.errors import AuthRevoked, InvalidPayload, MalformedMessage, error_class_of
from calsync.core.model.ids import new_id
from calsync.core.model.payload import PAYLOAD_IDS, JobPayload, raw_ids
from calsync.core.model.vocabulary import DeadLetterCause
from calsync.core.store import accounts, dead_letters, targets
from calsync.core.store.database import Database
from calsync.core.store.dead_letters import DeadLetterRecord, fitted
from calsync.core.store.targets import TargetKey
from calsync.core.webhooks import Outbox
from calsync.core.worker.delivery import Delivery, delivery_of
from calsync.core.worker.failures import (
    RETRIES_OPTION,
    STORE_DOWN,
    UnknownActor,
    count_option,
    error_entry,
    error_message,
    history_option,
    rejection_cause,
)
from calsync.core.worker.metrics import DEAD_LETTERS

log = logging.getLogger(__name__)

_JOB_TYPE_LIMIT = 64


class DeadLetterStoreUnavailable(BrokerConnectionError, MiddlewareError):
    """The DLQ record could not be written; Dramatiq retries the nack (and this hook) until it can."""


class DeadLetterRecorder(dramatiq.Middleware):
    """Writes the dead-letter record, marks the target failed and, when needed, the account."""

    def __init__(self, db: Database, outbox: Outbox | None = None) -> None:
        self.db = db
        self.outbox = outbox  # webhook notifications recorded with the dead letter

    def before_nack(self, broker: dramatiq.Broker, message: dramatiq.MessageProxy) -> None:
        delivery = delivery_of(message.message_id) or Delivery(message.message_id, message.actor_name, "")
        payload = delivery.payload
        error = delivery.error or UnknownActor(f"no actor named {message.actor_name!r}")  # never ran
        record = job_record(message, payload, error, delivery.dead_letter_cause or rejection_cause(error))
        try:
            notified = self._store_or_degrade(record, payload, error)
        except STORE_DOWN as exc:
            log.exception("could not record the dead letter; the nack will be retried")
            raise DeadLetterStoreUnavailable(str(exc)) from exc  # type: ignore[no-untyped-call]
        log.debug("job dead-lettered", extra={"fields": {"reason": record.reason, "error_class": record.error_class}})
        if notified and self.outbox is not None:
            self.outbox.send(broker, notified)

    def after_worker_shutdown(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        if self.outbox is not None:
            self.outbox.flush()  # webhook dispatches still lingering in this process (else: the reconciler)

    def quarantine(self, item: Quarantined) -> None:
        """Record a delivery the consumer refused (raises while the database is down: it stays queued)."""
        record = quarantine_record(item)
        self._store_or_degrade(record, None, None)
        DEAD_LETTERS.labels(record.job_type, record.reason).inc()  # never a job, so no calsync_jobs_total

    def _store_or_degrade(
        self, record: DeadLetterRecord, payload: JobPayload | None, error: BaseException | None
    ) -> list[str]:
        try:
            return self._store(record, payload, error)
        except STORE_DOWN:
            raise
        except Exception as exc:
            why = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            log.warning("dead letter refused by the database; storing it degraded", extra={"fields": {"why": why}})
        try:
            with self.db.write() as conn:
                dead_letters.insert(self.db, conn, fitted(record, why))
        except STORE_DOWN:
            raise
        except Exception:
            # fitted() cuts every column to the table, so this is a bug; retrying would loop forever.
            log.exception("could not store even the degraded dead letter", extra={"fields": {"job_id": record.job_id}})
        return []

    def _store(self, record: DeadLetterRecord, payload: JobPayload | None, error: BaseException | None) -> list[str]:
        with self.db.write() as conn:
            dead_letters.insert(self.db, conn, record)
            if payload is None:
                return []
            key = TargetKey(payload.tenant_id, payload.entity_id, payload.account_id)
            targets.record_failed(
                conn, key, version=payload.target_version, error_class=record.error_class, message=record.last_error
            )
            reauth = False
            if isinstance(error, AuthRevoked):
                account = accounts.get_summary(conn, payload.account_id)
                reauth = account is not None and account.status == "active"
                if reauth:
                    accounts.update_account(conn, payload.account_id, status="needs_reauth")
            return self.outbox.on_dead_lettered(conn, record, payload, needs_reauth=reauth) if self.outbox else []


def job_record(
    message: dramatiq.MessageProxy, payload: JobPayload | None, error: BaseException, cause: DeadLetterCause
) -> DeadLetterRecord:
    """The DLQ record of a rejected message: its payload, attempts, cause and error history."""
    attempt = payload.attempt if payload else max(1, count_option(message.options, RETRIES_OPTION))
    history = history_option(message.options)
    if not history or history[-1].get("attempt") != attempt:
        history.append(error_entry(attempt, error))
    if payload is not None:  # a valid payload's ids; else whatever ids the rejected one carried (bounded)
        ids = {name: getattr(payload, name) for name in PAYLOAD_IDS}
    else:
        ids = error.ids if isinstance(error, InvalidPayload) and error.ids else raw_ids(list(message.args))
    args = list(message.args)
    detail = cause.detail(attempt)
    return _record(
        ids,
        error,
        history,
        _first_failure(history),
        job_id=ids.get("job_id") or f"msg_{message.message_id}",
        job_type=payload.job_type if payload else message.actor_name,
        message_id=message.message_id,
        queue=message.queue_name,
        payload=args[0] if len(args) == 1 and not message.kwargs else {"args": args, "kwargs": dict(message.kwargs)},
        attempts=attempt,
        reason=cause.reason(error),
        last_error=error_message(error) + (f" ({detail})" if detail else ""),
    )


def quarantine_record(item: Quarantined) -> DeadLetterRecord:
    """The ``dead_letters`` row (kind ``quarantined``) of a delivery the door refused."""
    doc = item.document if isinstance(item.document, dict) else {}
    args = doc.get("args")
    error = MalformedMessage(item.detail, refusal=item.refusal.value)
    arrival = item.arrival
    record_id = new_id("quarantine")
    if arrival.unique_id and arrival.broker_message_id is not None:  # the same delivery, the same record
        named = f"{arrival.broker}\0{arrival.queue}\0{arrival.broker_message_id}".encode("utf-8", "replace")
        record_id = f"quarantine_{hashlib.sha256(named).hexdigest()[:40]}"
    return _record(
        raw_ids(args) if isinstance(args, list) else {},
        error,
        [error_entry(0, error)],
        None,
        job_id=record_id,
        job_type=_text(doc, "actor_name", _JOB_TYPE_LIMIT) or "unknown",
        message_id=_text(doc, "message_id", MESSAGE_ID_LIMIT),
        queue=arrival.queue[:128],
        payload=None,  # the raw body is the message; a replay decodes it
        attempts=0,
        reason=DeadLetterCause.QUARANTINED.reason(error),
        last_error=error_message(error),
        kind="quarantined",
        raw_body=item.raw_body,
        raw_size=item.raw_size,
        origin={**arrival.origin(), "truncated": item.truncated},
    )


def _record(
    ids: dict[str, str],
    error: BaseException,
    history: list[dict[str, Any]],
    first_failed_at: dt.datetime | None,
    **fields: Any,
) -> DeadLetterRecord:
    now = dt.datetime.now(dt.UTC)
    named: dict[str, Any] = {name: ids.get(name) for name in PAYLOAD_IDS if name != "job_id"}  # job_id: in fields
    return DeadLetterRecord(
        **named,
        error_class=error_class_of(error),
        error_history=history,
        first_failed_at=first_failed_at or now,
        failed_at=now,
        **fields,
    )


def _text(doc: dict[str, Any], name: str, limit: int) -> str | None:
    value = doc.get(name)
    return value if isinstance(value, str) and 0 < len(value) <= limit else None


def _first_failure(history: list[dict[str, Any]]) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(history[0]["at"])
    except (IndexError, KeyError, TypeError, ValueError):
        return None
